import { createTestApp, randomIp, TestApp } from '../../setup/app';
import { createTenant, TenantFixture } from '../../factories/tenant.factory';

// an app of its own: passport strategies are process-global, so a second app in one file would
// take over the first one's guards
describe('MFA verify: per-address rate limit (RATE_LIMIT_MFA_VERIFY_PER_IP_PER_MIN)', () => {
  let t: TestApp;
  let tenant: TenantFixture;
  beforeAll(async () => {
    t = await createTestApp({ RATE_LIMIT_MFA_VERIFY_PER_IP_PER_MIN: '3' });
    tenant = await createTenant(t.db);
  });
  afterAll(() => t.close());

  it('answers 429 rate_limit/exceeded with Retry-After and X-Service-Docs beyond the limit; other addresses are unaffected', async () => {
    const ip = randomIp();
    const send = (from = ip) =>
      t.http().post('/v1/auth/mfa/verify').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', from).send({ mfa_challenge_token: 'x', code: '123456' });
    for (let i = 0; i < 3; i++) expect((await send().expect(401)).body.code).toBe('mfa/invalid_challenge');
    const res = await send().expect(429);
    expect(res.body.code).toBe('rate_limit/exceeded');
    expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
    expect(Number(res.headers['retry-after'])).toBeLessThanOrEqual(60);
    expect(res.headers['x-service-docs']).toMatch(/^http/);
    await send(randomIp()).expect(401);
  });
});
