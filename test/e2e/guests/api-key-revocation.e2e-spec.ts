import { createTestApp, randomIp, STRONG_PASSWORD, TestApp, uniqueEmail } from '../../setup/app';
import { createApiKey, DashboardFixture, signupTenant } from '../../factories/dashboard.factory';

// issue 3 item 6 / spec 3.1: only a *guest* loses refresh when its creating key is revoked
describe('API key revocation affects only guests (issue 3 item 6)', () => {
  let t: TestApp;
  beforeAll(async () => { t = await createTestApp(); });
  afterAll(() => t.close());

  /** A tenant with guests on, two API keys ("old" and "new"), and a guest signed in with the old one. */
  const guestOfOldKey = async () => {
    const owner = await signupTenant(t);
    await t.db.query(`UPDATE tenants SET anonymous_signins_enabled = true WHERE slug = $1`, [owner.slug]);
    await t.tenantChanged(owner.tenantId);
    const k1 = await createApiKey(t, owner, 'old');
    const k2 = await createApiKey(t, owner, 'new');
    const g = await t.http().post('/v1/auth/anonymous').set('X-API-Key', k1.key).set('X-Forwarded-For', randomIp()).send({}).expect(201);
    return { owner, k1, k2, g };
  };
  const revoke = (owner: DashboardFixture, keyId: string) =>
    t.http().delete(`/v1/auth/dashboard/tenants/${owner.slug}/api-keys/${keyId}`).set('Cookie', owner.cookie).set('X-CSRF-Token', owner.csrf).expect(200);

  it('a claimed guest and a registered user keep refreshing after the key that created them is revoked (key rotation)', async () => {
    const { owner, k1, k2, g } = await guestOfOldKey();
    const claimed = await t.http().post('/v1/auth/register').set('X-API-Key', k1.key).set('X-Forwarded-For', randomIp())
      .set('Authorization', `Bearer ${g.body.access_token}`).send({ email: uniqueEmail('c'), password: STRONG_PASSWORD, consent: true }).expect(201);
    const reg = await t.http().post('/v1/auth/register').set('X-API-Key', k1.key).set('X-Forwarded-For', randomIp())
      .send({ email: uniqueEmail('r'), password: STRONG_PASSWORD, consent: true }).expect(201);
    await revoke(owner, k1.id);
    const r1 = await t.http().post('/v1/auth/refresh').set('X-API-Key', k2.key).send({ refresh_token: claimed.body.refresh_token });
    const r2 = await t.http().post('/v1/auth/refresh').set('X-API-Key', k2.key).send({ refresh_token: reg.body.refresh_token });
    expect([r1.status, r1.body.code, r2.status, r2.body.code]).toEqual([200, undefined, 200, undefined]);
  });

  it('a guest that refreshed into a new session token before revocation still fails refresh after it', async () => {
    const { owner, k1, k2, g } = await guestOfOldKey();
    // refreshed with another key of the tenant: does the guest now "belong" to k2?
    const r = await t.http().post('/v1/auth/refresh').set('X-API-Key', k2.key).send({ refresh_token: g.body.refresh_token }).expect(200);
    await revoke(owner, k1.id);
    await t.http().post('/v1/auth/refresh').set('X-API-Key', k2.key).send({ refresh_token: r.body.refresh_token }).expect(401);
  });
});
