import { createTestApp, randomIp, STRONG_PASSWORD, TestApp, uniqueEmail } from '../../setup/app';
import { post, tenantWithKey, TenantWithKey } from './account-security.helpers';

const FLOOR_MS = 400;

describe('enumeration-safe mail requests answer after the same time, known address or not (ENUMERATION_SAFE_MIN_RESPONSE_MS)', () => {
  let t: TestApp;
  let tenant: TenantWithKey;
  let known: string;
  beforeAll(async () => {
    t = await createTestApp({ ENUMERATION_SAFE_MIN_RESPONSE_MS: String(FLOOR_MS) });
    tenant = await tenantWithKey(t, { magic_link_enabled: true, email_otp_enabled: true });
    known = uniqueEmail('known');
    await post(t, '/v1/auth/register', tenant.apiKey, { email: known, password: STRONG_PASSWORD, consent: true }).expect(201);
  });
  afterAll(() => t.close());

  const timed = async (send: () => Promise<{ status: number }>): Promise<number> => {
    const started = performance.now();
    const res = await send();
    expect(res.status).toBe(202);
    return performance.now() - started;
  };

  it.each([
    ['POST /v1/auth/password/forgot', '/v1/auth/password/forgot', (email: string) => ({ email })],
    ['POST /v1/auth/verify-email/resend', '/v1/auth/verify-email/resend', (email: string) => ({ email })],
    ['POST /v1/auth/magic-link', '/v1/auth/magic-link', (email: string) => ({ email })],
    ['POST /v1/auth/email-otp (login)', '/v1/auth/email-otp', (email: string) => ({ email, mode: 'login' })],
  ])('%s: a known and an unknown address both answer 202 no sooner than the floor', async (_name, path, body) => {
    for (const email of [known, uniqueEmail('unknown')]) {
      const ms = await timed(() => post(t, path, tenant.apiKey, body(email)));
      // setTimeout may fire up to a millisecond before its delay as measured here
      expect(ms).toBeGreaterThanOrEqual(FLOOR_MS - 2);
    }
  });

  it('POST /v1/auth/dashboard/password/forgot: a dashboard account and an unknown address alike', async () => {
    for (const email of [tenant.email, uniqueEmail('nobody')]) {
      const ms = await timed(() => t.http().post('/v1/auth/dashboard/password/forgot').set('X-Forwarded-For', randomIp()).send({ email }));
      expect(ms).toBeGreaterThanOrEqual(FLOOR_MS - 2);
    }
  });
});
