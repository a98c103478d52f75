import { signupTenant } from '../../factories/dashboard.factory';
import { createTenant, TenantFixture } from '../../factories/tenant.factory';
import { createTestApp, randomIp, STRONG_PASSWORD, TestApp } from '../../setup/app';
import { mfaApi } from '../mfa/mfa.helpers';
import { bearerPost, outboxTo, register } from './account-security.helpers';

const PER_MIN = 3;
const NOTICES = 1;

/**
 * Passwords proven outside sign-in (change, step-up, MFA disable and recovery codes, dashboard
 * reauth) cost an argon2 verify each and the failed sign-in throttle takes a right password's
 * attempt back: they share a per-address limit (RATE_LIMIT_LOGIN_PER_IP_PER_MIN). Notices of a
 * change mailed to the account's address are capped per template and address
 * (RATE_LIMIT_EMAIL_PER_ADDRESS per window): the change goes on, the notice is left out.
 */
describe('password proofs outside sign-in: per-address limit; change notices capped per address', () => {
  let t: TestApp;
  let tenant: TenantFixture;
  beforeAll(async () => {
    t = await createTestApp({ RATE_LIMIT_LOGIN_PER_IP_PER_MIN: String(PER_MIN), RATE_LIMIT_EMAIL_PER_ADDRESS: String(NOTICES) });
    tenant = await createTenant(t.db);
  });
  afterAll(() => t.close());

  it('step-up, password change, MFA recovery codes share one per-address budget: 429 with Retry-After past it, another address is served', async () => {
    const api = mfaApi(t, tenant);
    const u = await api.enrolledUser();
    const ip = randomIp();
    await api.stepUp(u.accessToken, { password: STRONG_PASSWORD }, ip).expect(200);
    await api.regenerate(u.accessToken, { password: STRONG_PASSWORD, code: await u.device.next() }, ip).expect(200);
    await api.stepUp(u.accessToken, { password: 'a wrong password' }, ip).expect(401);
    for (const res of [
      await api.stepUp(u.accessToken, { password: STRONG_PASSWORD }, ip),
      await bearerPost(t, '/v1/auth/password/change', u.accessToken, { current_password: STRONG_PASSWORD, new_password: `${STRONG_PASSWORD}-2` }, ip),
      await api.regenerate(u.accessToken, { password: STRONG_PASSWORD, code: '000000' }, ip),
      await api.disable(u.accessToken, { password: STRONG_PASSWORD, code: '000000' }, ip),
    ]) {
      expect(res.status).toBe(429);
      expect(res.body.code).toBe('rate_limit/exceeded');
      expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
      expect(res.headers['x-service-docs']).toMatch(/#rate-limits$/);
    }
    await api.stepUp(u.accessToken, { password: STRONG_PASSWORD }, randomIp()).expect(200);
  });

  it('dashboard reauth is counted per address too', async () => {
    const d = await signupTenant(t);
    const ip = randomIp();
    const reauth = () => t.http().post('/v1/auth/dashboard/reauth').set('Cookie', d.cookie).set('X-CSRF-Token', d.csrf).set('X-Forwarded-For', ip).send({ password: d.password });
    for (let i = 0; i < PER_MIN; i++) await reauth().expect(200);
    expect((await reauth().expect(429)).body.code).toBe('rate_limit/exceeded');
  });

  it('changing the password in a loop changes it each time, and mails the "password changed" notice at most RATE_LIMIT_EMAIL_PER_ADDRESS times', async () => {
    const u = await register(t, tenant.apiKey);
    let current = u.password;
    for (let i = 0; i < NOTICES + 2; i++) {
      const next = `${STRONG_PASSWORD}-${i}`;
      await bearerPost(t, '/v1/auth/password/change', u.access, { current_password: current, new_password: next }).expect(204);
      current = next;
    }
    const mails = (await outboxTo(t, u.email)).filter((m) => m.event_type === 'email.password_changed');
    expect(mails).toHaveLength(NOTICES);
    // every change was made and audited
    expect(await t.db.query(`SELECT 1 FROM audit_events WHERE type = 'user.password_changed' AND target_id = $1`, [u.id])).toHaveLength(NOTICES + 2);
    await t.http().post('/v1/auth/login').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', randomIp()).send({ email: u.email, password: current }).expect(200);
  });

  it('second-factor notices are capped per kind of change: recovery codes renewed in a loop stop being told, turning MFA off is told all the same', async () => {
    const api = mfaApi(t, tenant);
    const u = await api.enrolledUser();
    let recovery = u.recoveryCodes;
    for (let i = 0; i < NOTICES + 1; i++) recovery = (await api.regenerate(u.accessToken, { password: STRONG_PASSWORD, code: await u.device.next() }).expect(200)).body.recovery_codes;
    const stepped = await api.steppedUp(u.accessToken);
    await api.disable(stepped, { password: STRONG_PASSWORD, code: recovery[0] }).expect(204);
    const changes = (await outboxTo(t, u.email)).filter((m) => m.event_type === 'email.mfa_changed').map((m) => JSON.parse(m.payload).data.change);
    expect(changes).toEqual(['enabled', ...Array(NOTICES).fill('recovery_codes_regenerated'), 'disabled']);
  });
});
