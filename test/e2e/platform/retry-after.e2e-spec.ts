import Redis from 'ioredis';
import { ClientHasher } from '../../../src/shared/crypto/client-hash';
import { REDIS } from '../../../src/shared/redis/redis.module';
import { addressSubject } from '../../../src/shared/rate-limit/address-key';
import { throttlerKeys } from '../../../src/shared/rate-limit/throttler-storage';
import { createTestApp, randomIp, TestApp } from '../../setup/app';
import { createTenant } from '../../factories/tenant.factory';

/**
 * Found by a mutation review: README "Rate limits": "past its limit a counter blocks for one window,
 * and a request refused during the block is not counted, so a client that waits its Retry-After
 * is let through". No test compared Retry-After with the block it reports: one second short
 * (RateLimitService.hit) passed every test, and a client waiting it would be refused again.
 */
describe('Retry-After covers the whole block', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp({ RATE_LIMIT_AUTH_READ_MAX: '3' });
  });
  afterAll(() => t.close());

  it('the 429 of a per-address limit says to wait at least until the block ends (never a second short)', async () => {
    const tenant = await createTenant(t.db, { anonymous_signins_enabled: true });
    const ip = randomIp();
    const anon = () => t.http().post('/v1/auth/anonymous').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', ip).send({});
    let refused;
    for (let i = 0; i < 10 && !refused; i++) {
      const r = await anon();
      if (r.status === 429) refused = r;
    }
    expect(refused).toBeDefined();
    const retryAfter = Number(refused!.headers['retry-after']);
    const redis = t.app.get<Redis>(REDIS);
    const { blocked } = throttlerKeys(`rl:ip:${addressSubject(t.app.get(ClientHasher), ip)}`, 'anon-ip');
    const leftMs = await redis.pttl(blocked);
    expect(leftMs).toBeGreaterThan(0);
    // waiting Retry-After seconds must reach past the block's end
    expect(retryAfter * 1000).toBeGreaterThanOrEqual(leftMs);
  });
  it('the 429 of a per-user limit (GET /v1/users/me/agents, RateLimitService.hit) says to wait at least until the block ends', async () => {
    const tenant = await createTenant(t.db, { anonymous_signins_enabled: true });
    const g = await t.http().post('/v1/auth/anonymous').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', randomIp()).send({}).expect(201);
    let refused;
    for (let i = 0; i < 10 && !refused; i++) {
      const r = await t.http().get('/v1/users/me/agents').set('Authorization', `Bearer ${g.body.access_token}`);
      if (r.status === 429) refused = r;
      else expect(r.status).toBe(200);
    }
    expect(refused).toBeDefined();
    const retryAfter = Number(refused!.headers['retry-after']);
    const { blocked } = throttlerKeys(`rl:user:${g.body.user.id}`, 'my-agents-read');
    const leftMs = await t.app.get<Redis>(REDIS).pttl(blocked);
    expect(leftMs).toBeGreaterThan(0);
    expect(retryAfter * 1000).toBeGreaterThanOrEqual(leftMs);
  });
});
