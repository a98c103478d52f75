import { UserPrincipal } from '../../../src/shared/auth/auth-context';
import { AccessClaims } from '../../../src/shared/crypto/jwt.service';
import { StepUpTokenService } from '../../../src/modules/mfa/step-up/step-up-token.service';
import { createTestApp, randomIp, STRONG_PASSWORD, TestApp } from '../../setup/app';
import { createTenant, TenantFixture } from '../../factories/tenant.factory';
import { claimsOf, mfaApi } from './mfa.helpers';

jest.setTimeout(90_000);

describe('step-up by password (spec 2.5 StepUpPasswordRequest) and @RequireStepUp', () => {
  let t: TestApp;
  let tenant: TenantFixture;
  let api: ReturnType<typeof mfaApi>;
  beforeAll(async () => {
    t = await createTestApp();
    tenant = await createTenant(t.db);
    api = mfaApi(t, tenant);
  });
  afterAll(() => t.close());

  const now = () => Math.floor(Date.now() / 1000);

  it('answers {access_token, expires_in, token_type} for the same session, with step_up_at and pwd in amr', async () => {
    const u = await api.register();
    const login = await api.login(u.email).expect(200);
    const before = now();
    const res = await api.stepUp(login.body.access_token, { password: STRONG_PASSWORD }).expect(200);
    const after = now();
    expect(res.body).toEqual({ access_token: expect.any(String), expires_in: 900, token_type: 'Bearer' });
    const old = claimsOf(login.body.access_token);
    const claims = claimsOf(res.body.access_token);
    expect(claims).toMatchObject({ sub: u.userId, tenant_id: tenant.id, sid: old.sid, scope: old.scope, aal: 'AAL1', amr: ['pwd'], role: 'member' });
    expect(claims.jti).not.toBe(old.jti);
    expect(Number.isInteger(claims.step_up_at)).toBe(true);
    expect(Number(claims.step_up_at)).toBeGreaterThanOrEqual(before);
    expect(Number(claims.step_up_at)).toBeLessThanOrEqual(after);
    await api.me(res.body.access_token).expect(200);
    // it may step up again (with the stepped-up token)
    await api.stepUp(res.body.access_token, { password: STRONG_PASSWORD }).expect(200);
  });

  it('the method joins the session amr (a session without pwd gains it); aal stays the session one', async () => {
    const u = await api.register();
    const login = await api.login(u.email).expect(200);
    await t.db.query(`UPDATE user_sessions SET amr = '{email}' WHERE id = $1`, [claimsOf(login.body.access_token).sid]);
    const res = await api.stepUp(login.body.access_token, { password: STRONG_PASSWORD }).expect(200);
    expect(claimsOf(res.body.access_token)).toMatchObject({ amr: ['email', 'pwd'], aal: 'AAL1' });
  });

  it('an AAL2 (MFA) session keeps aal AAL2 and amr [pwd, otp]', async () => {
    const u = await api.enrolledUser();
    const session = await api.signIn(u);
    const res = await api.stepUp(session.access_token, { password: STRONG_PASSWORD }).expect(200);
    expect(claimsOf(res.body.access_token)).toMatchObject({ aal: 'AAL2', amr: ['pwd', 'otp'], sid: claimsOf(session.access_token).sid });
  });

  it('StepUpTokenService.issue (for the magic-link and email-OTP step-ups) adds the given method', async () => {
    const u = await api.register();
    const login = await api.login(u.email).expect(200);
    const claims = claimsOf(login.body.access_token) as unknown as AccessClaims;
    const principal: UserPrincipal = { userId: u.userId, tenantId: tenant.id, sessionId: claims.sid, isAnonymous: false, claims };
    const res = await t.app.get(StepUpTokenService).issue(principal, 'email');
    expect(Object.keys(res).sort()).toEqual(['access_token', 'expires_in', 'token_type']);
    expect(claimsOf(res.access_token)).toMatchObject({ amr: ['pwd', 'email'], step_up_at: expect.any(Number) });
    const [audit] = await t.db.query<{ metadata: { method: string } }>(`SELECT metadata FROM audit_events WHERE type = 'user.step_up' AND actor_id = $1`, [u.userId]);
    expect(audit.metadata).toEqual({ method: 'email' });
  });

  it('a wrong password is 401 auth/invalid_credentials and is throttled with password login (429 auth/login_throttled)', async () => {
    const u = await api.register();
    const login = await api.login(u.email).expect(200);
    const ip = randomIp();
    for (let i = 0; i < 5; i++) {
      const res = await api.stepUp(login.body.access_token, { password: 'not the password' }, ip).expect(401);
      expect(res.body.code).toBe('auth/invalid_credentials');
    }
    const throttled = await api.stepUp(login.body.access_token, { password: STRONG_PASSWORD }, ip).expect(429);
    expect(throttled.body.code).toBe('auth/login_throttled');
    expect(Number(throttled.headers['retry-after'])).toBeGreaterThan(0);
    // the same counters as password login of that account from that address
    expect((await api.login(u.email, STRONG_PASSWORD, tenant.apiKey, ip).expect(429)).body.code).toBe('auth/login_throttled');
    await api.stepUp(login.body.access_token, { password: STRONG_PASSWORD }, randomIp()).expect(200);
  });

  it('an ended session cannot step up', async () => {
    const u = await api.register();
    const login = await api.login(u.email).expect(200);
    await t.http().post('/v1/auth/logout').set('Authorization', `Bearer ${login.body.access_token}`).expect(204);
    await api.stepUp(login.body.access_token, { password: STRONG_PASSWORD }).expect(401);
  });

  it.each([
    ['password missing', {}, 'password'],
    ['password empty', { password: '' }, 'password'],
    ['password of 257 characters', { password: 'p'.repeat(257) }, 'password'],
    ['password not a string', { password: 12345678 }, 'password'],
    ['an extra property', { password: STRONG_PASSWORD, action: 'delete' }, 'action'],
  ])('rejects %s with 400 request/invalid', async (_n, body, field) => {
    const u = await api.register();
    const res = await api.stepUp(u.accessToken, body).expect(400);
    expect(res.body.code).toBe('request/invalid');
    expect(res.body.errors.map((e: { field: string }) => e.field)).toContain(field);
  });

  it('accepts a password of 256 characters (then it is merely wrong)', async () => {
    const u = await api.register();
    expect((await api.stepUp(u.accessToken, { password: 'p'.repeat(256) }).expect(401)).body.code).toBe('auth/invalid_credentials');
  });

  it('@RequireStepUp on MFA disable: a plain token and a refreshed one (no step_up_at) get 403 auth/step_up_required', async () => {
    const u = await api.enrolledUser();
    const session = await api.signIn(u);
    const body = { code: '123456', password: STRONG_PASSWORD };
    expect((await api.disable(session.access_token, body).expect(403)).body.code).toBe('auth/step_up_required');
    const stepped = await api.steppedUp(session.access_token);
    const refreshed = await t.http().post('/v1/auth/refresh').set('X-API-Key', tenant.apiKey).send({ refresh_token: session.refresh_token }).expect(200);
    expect(claimsOf(refreshed.body.access_token).step_up_at).toBeUndefined();
    expect((await api.disable(refreshed.body.access_token, body).expect(403)).body.code).toBe('auth/step_up_required');
    // the fresh step-up passes the guard (then the code decides)
    expect((await api.disable(stepped, body).expect(401)).body.code).toBe('mfa/invalid_code');
  });
});
