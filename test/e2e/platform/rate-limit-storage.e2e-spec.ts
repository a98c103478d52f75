import { createHash, randomBytes } from 'crypto';
import Redis from 'ioredis';
import { RateLimitService } from '../../../src/shared/rate-limit/rate-limit.service';
import { createTestApp, randomIp, STRONG_PASSWORD, TestApp, uniqueEmail } from '../../setup/app';
import { rawRedis } from '../agents/agents.helpers';
import { expectedClientHash, expectedKeySubject } from '../../setup/client-hash';
import { post, register, tenantWithKey } from '../account-security/account-security.helpers';

/** The limiter's Redis script: run by SHA1, same answers as the library's EVAL, survives a script flush. */
describe('rate limiter storage (EVALSHA)', () => {
  let t: TestApp;
  let limiter: RateLimitService;
  let redis: Redis;
  beforeAll(async () => {
    t = await createTestApp();
    limiter = t.app.get(RateLimitService);
    redis = rawRedis();
  });
  afterAll(async () => {
    redis.disconnect();
    await t.close();
  });

  const calls = async (cmd: string) => {
    const m = new RegExp(`^cmdstat_${cmd}:calls=(\\d+)`, 'm').exec(await redis.info('commandstats'));
    return m ? Number(m[1]) : 0;
  };

  it('counts a fixed window, blocks past the limit with the remaining wait, by EVALSHA', async () => {
    const key = `test:${randomBytes(6).toString('hex')}`;
    await limiter.hit('warm-up', key, 10, 60); // the first script call on a connection carries the script (EVAL)
    const before = await calls('evalsha');
    for (let i = 1; i <= 3; i++) expect(await limiter.hit('bucket', key, 3, 60)).toEqual({ allowed: true, count: i, retryAfterSeconds: 0 });
    const blocked = await limiter.hit('bucket', key, 3, 60);
    expect(blocked.allowed).toBe(false);
    expect(blocked.count).toBe(4);
    expect(blocked.retryAfterSeconds).toBeGreaterThanOrEqual(59);
    expect(blocked.retryAfterSeconds).toBeLessThanOrEqual(60);
    expect((await calls('evalsha')) - before).toBeGreaterThanOrEqual(4);
    // the keys are the library's: {rl:<key>:<bucket>}:hits and :blocked under the prefix
    const prefix = process.env.REDIS_KEY_PREFIX as string;
    expect(await redis.get(`${prefix}{rl:${key}:bucket}:hits`)).toBe('4');
    expect(await redis.exists(`${prefix}{rl:${key}:bucket}:blocked`)).toBe(1);
  });

  it('keeps working after Redis forgot its scripts (restart, SCRIPT FLUSH): the block holds', async () => {
    const key = `test:${randomBytes(6).toString('hex')}`;
    for (let i = 0; i < 2; i++) await limiter.hit('bucket', key, 1, 60);
    await redis.script('FLUSH');
    const r = await limiter.hit('bucket', key, 1, 60);
    expect(r.allowed).toBe(false);
    expect(r.count).toBe(2); // refused while blocked: not counted
    // a separate key starts from one
    expect(await limiter.hit('bucket', `${key}:other`, 1, 60)).toEqual({ allowed: true, count: 1, retryAfterSeconds: 0 });
  });

  it('a request refused while blocked uses up nothing: a client that retries during the block is let through once its Retry-After is over', async () => {
    const key = `test:${randomBytes(6).toString('hex')}`;
    const prefix = process.env.REDIS_KEY_PREFIX as string;
    const hits = `${prefix}{rl:${key}:retry}:hits`;
    const blocked = `${prefix}{rl:${key}:retry}:blocked`;
    const gone = (k: string) => async () => (await redis.exists(k)) === 0;
    const until = async (done: () => Promise<boolean>) => {
      while (!(await done())) await new Promise((r) => setTimeout(r, 25));
    };
    // an 8 s window; the limit is passed late in it (4 s in: 4 s of the window left for that
    // request to arrive), so the block (8 s from then) outlives the window by 4 s
    expect((await limiter.hit('retry', key, 1, 8)).allowed).toBe(true);
    await new Promise((r) => setTimeout(r, 4000));
    expect(await limiter.hit('retry', key, 1, 8)).toMatchObject({ allowed: false, count: 2, retryAfterSeconds: 8 });
    // retries once the counting window has rolled over, while the block runs: refused, not counted
    await until(gone(hits));
    for (let i = 0; i < 3; i++) expect(await limiter.hit('retry', key, 1, 8)).toMatchObject({ allowed: false, count: 0 });
    expect(await redis.exists(blocked)).toBe(1);
    // the block over: the next request starts a new window
    await until(gone(blocked));
    expect(await limiter.hit('retry', key, 1, 8)).toEqual({ allowed: true, count: 1, retryAfterSeconds: 0 });
  }, 30_000);

  it('limits independent windows of the same key per bucket', async () => {
    const key = `test:${randomBytes(6).toString('hex')}`;
    await limiter.hit('a', key, 1, 60);
    expect((await limiter.hit('a', key, 1, 60)).allowed).toBe(false);
    expect((await limiter.hit('b', key, 1, 60)).allowed).toBe(true);
  });
});

/** Client addresses never appear in Redis: per-address counters are keyed by their keyed hash prefix. */
describe('per-address limits keep no client address in Redis', () => {
  let t: TestApp;
  let redis: Redis;
  beforeAll(async () => {
    t = await createTestApp();
    redis = rawRedis();
  });
  afterAll(async () => {
    redis.disconnect();
    await t.close();
  });

  it('a rule by ip (register) counts under the HMAC prefix of the address (IPv4, IPv6 /64), never the address', async () => {
    const ip = `198.51.100.${10 + Math.floor(Math.random() * 200)}`;
    await t.http().post('/v1/auth/register').set('X-Forwarded-For', ip).send({}).expect((r) => expect([400, 401]).toContain(r.status));
    await t.http().post('/v1/auth/register').set('X-Forwarded-For', '2001:db8:7:8::1').send({}).expect((r) => expect([400, 401]).toContain(r.status));
    const prefix = process.env.REDIS_KEY_PREFIX as string;
    const keys: string[] = [];
    for await (const batch of redis.scanStream({ match: `${prefix}*`, count: 1000 })) keys.push(...(batch as string[]));
    expect(keys.filter((k) => k.includes(ip) || k.includes('2001:db8'))).toEqual([]);
    expect(keys).toContain(`${prefix}{rl:ip:${expectedClientHash(ip)}:register}:hits`);
    expect(keys).toContain(`${prefix}{rl:ip:${expectedClientHash('2001:db8:7:8::/64')}:register}:hits`);
  });

  it('keys named after an email address (sign-in failures, mail and invitation quotas, a honeypot signup) hold a keyed hash of it: neither the address nor its plain SHA-256', async () => {
    const d = await tenantWithKey(t);
    const user = await register(t, d.apiKey);
    const ip = randomIp();
    await post(t, '/v1/auth/login', d.apiKey, { email: user.email, password: 'not the password at all' }, ip).expect(401);
    await post(t, '/v1/auth/password/forgot', d.apiKey, { email: user.email }, ip).expect(202);
    await t.http().post('/v1/auth/dashboard/login').set('X-Forwarded-For', ip).send({ email: d.email, password: `${STRONG_PASSWORD}!` }).expect(401);
    const invited = uniqueEmail('invited');
    await t.http().post(`/v1/auth/dashboard/tenants/${d.slug}/members`).set('Cookie', d.cookie).set('X-CSRF-Token', d.csrf).send({ email: invited, role: 'member' }).expect(201);
    const decoy = uniqueEmail('decoy'); // a honeypot signup remembers its email for a while
    await t.http().post('/v1/onboarding/signup').set('X-Forwarded-For', randomIp()).send({ email: decoy, password: STRONG_PASSWORD, tenant_name: 'Decoy Co', consent_terms: true, consent_privacy: true, website: 'https://spam.example' }).expect(201);

    const prefix = process.env.REDIS_KEY_PREFIX as string;
    const keys: string[] = [];
    for await (const batch of redis.scanStream({ match: `${prefix}*`, count: 1000 })) keys.push(...(batch as string[]));
    const emails = [user.email, d.email, invited, decoy];
    expect(keys.filter((k) => emails.some((e) => k.toLowerCase().includes(e.toLowerCase())))).toEqual([]);
    // what a plain hash of each would have been (reversible with a list of addresses): nowhere
    const plain = [`user:${d.tenantId}:${user.email}`, `${d.tenantId}:${user.email}`, `dashboard:${d.email}`, invited, decoy].map((v) => createHash('sha256').update(v).digest('hex').slice(0, 32));
    expect(keys.filter((k) => plain.some((h) => k.includes(h)))).toEqual([]);
    const subjects = [`user:${d.tenantId}:${user.email}`, `mail:${d.tenantId}:${user.email}`, `dashboard:${d.email}`, `invite:${invited}`, `signup-decoy:${decoy}`].map(expectedKeySubject);
    for (const subject of subjects) expect(keys.filter((k) => k.includes(subject)).length).toBeGreaterThan(0);
  });
});
