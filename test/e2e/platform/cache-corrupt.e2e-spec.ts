import Redis from 'ioredis';
import { sha256Hex } from '../../../src/shared/crypto/tokens';
import { REDIS } from '../../../src/shared/redis/redis.module';
import { createTenant, TenantFixture } from '../../factories/tenant.factory';
import { createTestApp, randomIp, STRONG_PASSWORD, TestApp, uniqueEmail } from '../../setup/app';

/**
 * A cache slot holding something that is not JSON (written by hand, cut short by a full disk on a
 * replica, another version's format) is a miss: the request is answered from PostgreSQL and the
 * slot repaired, never a 500 (nor an unhandled rejection of the prefetched read).
 */
describe('read-through caches: a slot that is not JSON is a miss', () => {
  let t: TestApp;
  let redis: Redis;
  let tenant: TenantFixture;
  beforeAll(async () => {
    t = await createTestApp();
    redis = t.app.get(REDIS);
    tenant = await createTenant(t.db);
  });
  afterAll(() => t.close());

  it('the API-key principal and the /me profile: answered from PostgreSQL, the slot repaired', async () => {
    await redis.set(`apikey:${sha256Hex(tenant.apiKey)}`, '{"cut short', 'EX', 60);
    const reg = await t
      .http()
      .post('/v1/auth/register')
      .set('X-API-Key', tenant.apiKey)
      .set('X-Forwarded-For', randomIp())
      .send({ email: uniqueEmail('corrupt'), password: STRONG_PASSWORD, consent: true })
      .expect(201);
    expect(JSON.parse((await redis.get(`apikey:${sha256Hex(tenant.apiKey)}`))!)).toMatchObject({ tenantId: tenant.id });

    await redis.set(`me:${reg.body.user.id}`, 'not json', 'EX', 60);
    const me = await t.http().get('/v1/auth/me').set('Authorization', `Bearer ${reg.body.access_token}`).expect(200);
    expect(me.body.id).toBe(reg.body.user.id);
    expect(JSON.parse((await redis.get(`me:${reg.body.user.id}`))!)).toMatchObject({ id: reg.body.user.id });
  });
});
