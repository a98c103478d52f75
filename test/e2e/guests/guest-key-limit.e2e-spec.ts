import { namedQueryParams } from '../../setup/query-spy';
import { randomBytes } from 'crypto';
import Redis from 'ioredis';
import { hashPrefix, sha256Hex } from '../../../src/shared/crypto/tokens';
import { rawRedis } from '../agents/agents.helpers';
import { createTenant } from '../../factories/tenant.factory';
import { createTestApp, randomIp, TestApp } from '../../setup/app';

/**
 * The per-API-key limit of guest sign-in (`by: 'api_key'`, RateLimitGuard) counts real keys only:
 * a made-up X-API-Key leaves no counter in Redis (it is answered 401 all the same), while the
 * per-address limit still counts every request.
 */
describe('per-API-key limits count only keys that resolve', () => {
  let t: TestApp;
  let redis: Redis;
  const prefix = process.env.REDIS_KEY_PREFIX as string;
  beforeAll(async () => {
    t = await createTestApp({ RATE_LIMIT_ANONYMOUS_PER_KEY_PER_HOUR: '3' });
    redis = rawRedis();
  });
  afterAll(async () => {
    redis?.disconnect();
    await t?.close();
  });

  const anon = (key: string | undefined, ip = randomIp()) => {
    const req = t.http().post('/v1/auth/anonymous').set('X-Forwarded-For', ip);
    if (key !== undefined) req.set('X-API-Key', key);
    return req.send({});
  };
  /** every per-key counter of guest sign-in under this test file's prefix (hits and blocks) */
  const perKeyCounters = async () => {
    const found: string[] = [];
    for await (const keys of redis.scanStream({ match: `${prefix}{rl:api_key:*`, count: 1000 })) found.push(...(keys as string[]));
    return found.sort();
  };
  const madeUpKey = () => `authp_${randomBytes(32).toString('base64url')}`;
  /** the API-key lookups that reach PostgreSQL while `run` runs, by key hash */
  const pgLookups = (run: () => Promise<unknown>) => namedQueryParams(t.db, 'api_key_resolve', run);

  it('many requests with distinct unknown keys are 401 and create no per-key counter; each reads PostgreSQL once', async () => {
    expect(await perKeyCounters()).toEqual([]);
    const keys = Array.from({ length: 25 }, madeUpKey);
    const lookups = await pgLookups(async () => {
      for (const key of keys) expect((await anon(key).expect(401)).body.code).toBe('auth/invalid_api_key');
    });
    // one lookup per request: the API-key guard used the rate-limit guard's resolution
    expect(lookups).toEqual(keys.map(sha256Hex));
    // malformed ones too: too long, empty, none at all
    for (const key of ['x'.repeat(201), '', undefined]) expect((await anon(key).expect(401)).body.code).toBe('auth/invalid_api_key');
    expect(await perKeyCounters()).toEqual([]);
  });

  it('a revoked key counts in no per-key counter either', async () => {
    const tenant = await createTenant(t.db, { anonymous_signins_enabled: true });
    await t.db.query(`UPDATE api_keys SET revoked_at = now() WHERE id = $1`, [tenant.apiKeyId]);
    for (let i = 0; i < 5; i++) expect((await anon(tenant.apiKey).expect(401)).body.code).toBe('auth/invalid_api_key');
    expect(await perKeyCounters()).toEqual([]);
  });

  it('unknown keys still count against their address: past 5 a minute, 429 without any PostgreSQL read', async () => {
    const ip = randomIp();
    for (let i = 0; i < 5; i++) await anon(madeUpKey(), ip).expect(401);
    const lookups = await pgLookups(async () => {
      const res = await anon(madeUpKey(), ip).expect(429);
      expect(res.body.code).toBe('anonymous/rate_limited');
      expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
    });
    expect(lookups).toEqual([]);
    expect(await perKeyCounters()).toEqual([]);
  });

  it('a real key is counted in one counter and limited (429 anonymous/rate_limited with Retry-After), its principal loaded from PostgreSQL once', async () => {
    const tenant = await createTenant(t.db, { anonymous_signins_enabled: true });
    const lookups = await pgLookups(async () => {
      await anon(tenant.apiKey).expect(201); // a cold cache: loaded from PostgreSQL once, then cached
      await anon(tenant.apiKey).expect(201);
    });
    expect(lookups).toEqual([sha256Hex(tenant.apiKey)]);
    await anon(tenant.apiKey).expect(201);
    const res = await anon(tenant.apiKey).expect(429);
    expect(res.body.code).toBe('anonymous/rate_limited');
    expect(Number(res.headers['retry-after'])).toBeGreaterThan(60);
    expect(Number(res.headers['retry-after'])).toBeLessThanOrEqual(3600);
    const counter = `${prefix}{rl:api_key:${hashPrefix(tenant.apiKey)}:anon-key}`;
    expect((await perKeyCounters()).every((k) => k.startsWith(counter))).toBe(true);
    expect(await redis.get(`${counter}:hits`)).toBe('4');
    // the limit is the key's, whatever the address; a made-up key meanwhile is still 401
    expect((await anon(tenant.apiKey).expect(429)).body.code).toBe('anonymous/rate_limited');
    expect((await anon(madeUpKey()).expect(401)).body.code).toBe('auth/invalid_api_key');
    expect((await perKeyCounters()).every((k) => k.startsWith(counter))).toBe(true);
  });
});
