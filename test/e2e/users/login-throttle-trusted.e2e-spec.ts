import Redis from 'ioredis';
import { ClientHasher } from '../../../src/shared/crypto/client-hash';
import { RateLimitedError } from '../../../src/shared/errors/app-error';
import { addressSubject } from '../../../src/shared/rate-limit/address-key';
import { LoginThrottleService, passwordSignInRealm, ThrottleLimits, TRUSTED_MAX_ADDRESSES } from '../../../src/shared/rate-limit/login-throttle.service';
import { REDIS } from '../../../src/shared/redis/redis.module';
import { createTenant, TenantFixture } from '../../factories/tenant.factory';
import { createTestApp, randomIp, STRONG_PASSWORD, TestApp, uniqueEmail } from '../../setup/app';

const DAY_MS = 86_400_000;

/**
 * The known addresses of an account (exempt from its failure limit, login-throttle.service.ts):
 * each one for 30 days after its own last success, the TRUSTED_MAX_ADDRESSES most recent at most.
 */
describe('failed sign-in throttle: the addresses known to an account', () => {
  let t: TestApp;
  let tenant: TenantFixture;
  let redis: Redis;
  let throttle: LoginThrottleService;
  let hasher: ClientHasher;
  beforeAll(async () => {
    t = await createTestApp();
    tenant = await createTenant(t.db);
    redis = t.app.get(REDIS); // its keyPrefix is the test's own
    throttle = t.app.get(LoginThrottleService);
    hasher = t.app.get(ClientHasher);
  });
  afterAll(() => t.close());

  const realm = () => passwordSignInRealm(tenant.id);
  const acct = (account: string) => hasher.subject(`${realm()}:${account}`);
  const knownKey = (account: string) => `login-trusted:z:${acct(account)}`;
  const legacyKey = (account: string) => `login-trusted:${acct(account)}`;
  const addr = (ip: string) => addressSubject(hasher, ip);
  /** a low account limit, the others out of the way */
  const limits: ThrottleLimits = { perAccountIp: 100, perAccount: 2, perIp: 100, windowSeconds: 60 };
  /** whether an attempt of `account` from `ip` is let through under `limits` (it is then released) */
  const letThrough = async (account: string, ip: string) => {
    const e = await throttle.attempt(realm(), account, ip, limits).then(() => undefined, (err: unknown) => err);
    if (e === undefined) {
      await throttle.release(realm(), account, ip);
      return true;
    }
    expect(e).toBeInstanceOf(RateLimitedError);
    return false;
  };
  /** the account limit reached, from addresses that never succeeded */
  const tripAccountLimit = async (account: string) => {
    for (let i = 0; i < limits.perAccount; i++) {
      const ip = randomIp();
      await throttle.attempt(realm(), account, ip, limits);
      await throttle.failed(realm(), account, ip);
    }
    expect(await letThrough(account, randomIp())).toBe(false);
  };

  it('a success records its address in a sorted set scored by the time of that success, the set expiring 30 days after the last one', async () => {
    const account = uniqueEmail();
    const ip = randomIp();
    const before = Date.now();
    await throttle.trustAddress(realm(), account, ip);
    expect(await redis.type(knownKey(account))).toBe('zset');
    const first = Number(await redis.zscore(knownKey(account), addr(ip)));
    expect(first).toBeGreaterThanOrEqual(before);
    expect(first).toBeLessThanOrEqual(Date.now());
    const ttl = await redis.ttl(knownKey(account));
    expect(ttl).toBeGreaterThan(30 * 86400 - 60);
    expect(ttl).toBeLessThanOrEqual(30 * 86400);
    // the former key (a plain SET) is never written
    expect(await redis.exists(legacyKey(account))).toBe(0);
    // another success from the address moves its score to that success
    await redis.zadd(knownKey(account), first - 10 * DAY_MS, addr(ip));
    await throttle.judge(realm(), account, ip, async () => true);
    expect(Number(await redis.zscore(knownKey(account), addr(ip)))).toBeGreaterThanOrEqual(first);
    expect(await redis.zcard(knownKey(account))).toBe(1);
    expect(await throttle.isKnownAddress(realm(), account, ip)).toBe(true);
  });

  it('the address of a success is exempt from the account limit; an address whose last success is over 30 days old is not, and is dropped at the next success', async () => {
    const account = uniqueEmail();
    const [recent, stale, fresh] = [randomIp(), randomIp(), randomIp()];
    const now = Date.now();
    await redis.zadd(knownKey(account), now - 29 * DAY_MS, addr(recent), now - 31 * DAY_MS, addr(stale));
    await tripAccountLimit(account);
    expect(await letThrough(account, recent)).toBe(true);
    expect(await letThrough(account, stale)).toBe(false);
    expect(await throttle.isKnownAddress(realm(), account, recent)).toBe(true);
    expect(await throttle.isKnownAddress(realm(), account, stale)).toBe(false);
    // a success elsewhere trims what is over 30 days old
    await throttle.trustAddress(realm(), account, fresh);
    expect(await redis.zscore(knownKey(account), addr(stale))).toBeNull();
    expect((await redis.zrange(knownKey(account), 0, -1)).sort()).toEqual([addr(recent), addr(fresh)].sort());
    expect(await letThrough(account, fresh)).toBe(true);
    // a success that signs nothing in (trust: false) records nothing
    const untrusted = randomIp();
    await throttle.judge(realm(), account, untrusted, async () => true, { trust: false });
    expect(await throttle.isKnownAddress(realm(), account, untrusted)).toBe(false);
  });

  it(`keeps the ${TRUSTED_MAX_ADDRESSES} most recent addresses of an account, dropping the least recently successful first`, async () => {
    const account = uniqueEmail();
    const now = Date.now();
    const older = Array.from({ length: TRUSTED_MAX_ADDRESSES + 10 }, () => randomIp());
    // sixty addresses that succeeded in the last days, the first the longest ago
    await redis.zadd(knownKey(account), ...older.flatMap((ip, i) => [now - DAY_MS + i * 1000, addr(ip)]));
    const latest = randomIp();
    await throttle.trustAddress(realm(), account, latest);
    expect(await redis.zcard(knownKey(account))).toBe(TRUSTED_MAX_ADDRESSES);
    const kept = await redis.zrange(knownKey(account), 0, -1);
    expect(kept).toContain(addr(latest));
    for (const ip of older.slice(0, 11)) expect(kept).not.toContain(addr(ip));
    for (const ip of older.slice(11)) expect(kept).toContain(addr(ip));
    await tripAccountLimit(account);
    expect(await letThrough(account, older[0])).toBe(false);
    expect(await letThrough(account, older[older.length - 1])).toBe(true);
    expect(await letThrough(account, latest)).toBe(true);
  });

  it('through HTTP: the registration and each password sign-in record their address', async () => {
    const email = uniqueEmail();
    const owner = randomIp();
    const key = tenant.apiKey;
    const post = (path: string, body: object, ip: string) => t.http().post(path).set('X-API-Key', key).set('X-Forwarded-For', ip).send(body);
    await post('/v1/auth/register', { email, password: STRONG_PASSWORD, consent: true }, owner).expect(201);
    for (let i = 0; i < 8; i++) await post('/v1/auth/login', { email, password: STRONG_PASSWORD }, randomIp()).expect(200);
    expect(await redis.zcard(knownKey(email))).toBe(9);
    expect(await throttle.isKnownAddress(realm(), email, owner)).toBe(true);
  });

  it('an address in the former plain SET (written before the deploy) stays exempt until that key expires, and no WRONGTYPE comes of it', async () => {
    const account = uniqueEmail();
    const old = randomIp();
    await redis.multi().sadd(legacyKey(account), addr(old)).expire(legacyKey(account), 30 * 86400).exec();
    await tripAccountLimit(account);
    expect(await letThrough(account, old)).toBe(true);
    expect(await throttle.isKnownAddress(realm(), account, old)).toBe(true);
    // a success records the address in the new set; the former one is left to expire
    await throttle.trustAddress(realm(), account, old);
    expect(await redis.type(knownKey(account))).toBe('zset');
    expect(await redis.zscore(knownKey(account), addr(old))).not.toBeNull();
    expect(await redis.type(legacyKey(account))).toBe('set');
    expect(await letThrough(account, randomIp())).toBe(false);
  });
});
