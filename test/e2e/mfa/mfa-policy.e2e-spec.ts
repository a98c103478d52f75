import { createTestApp, randomIp, STRONG_PASSWORD, TestApp } from '../../setup/app';
import { createTenant, TenantFixture } from '../../factories/tenant.factory';
import { EnrollmentTokenService } from '../../../src/modules/mfa/enrollment-token.service';
import { claimsOf, mfaApi, TotpDevice } from './mfa.helpers';
import { namedQueryParams } from '../../setup/query-spy';

const DAY = 86_400;

describe('MFA policy (spec 2.8 mfa_policy, mfa_grace_period_days; issue 5 item 6)', () => {
  let t: TestApp;
  let tenant: TenantFixture;
  let other: TenantFixture;
  let api: ReturnType<typeof mfaApi>;
  beforeAll(async () => {
    t = await createTestApp();
    tenant = await createTenant(t.db);
    other = await createTenant(t.db);
    api = mfaApi(t, tenant);
  });
  afterAll(() => t.close());

  /** The policy as the settings endpoint leaves it: required since `daysAgo`, with `grace` days. */
  const requireMfa = (daysAgo: number, grace = 7, id = tenant.id) =>
    t.db.query(`UPDATE tenants SET mfa_policy = 'required', mfa_grace_period_days = $2, mfa_required_since = now() - make_interval(secs => $3) WHERE id = $1`, [
      id,
      grace,
      daysAgo * DAY,
    ]);
  const userCreatedDaysAgo = (userId: string, days: number) => t.db.query(`UPDATE users SET created_at = now() - make_interval(secs => $2) WHERE id = $1`, [userId, days * DAY]);
  /** A user whose grace ended: created long ago, policy required 10 days ago with 3 days of grace. */
  const lockedOut = async () => {
    const u = await api.register();
    await userCreatedDaysAgo(u.userId, 60);
    await requireMfa(10, 3);
    return u;
  };
  const enrollmentToken = async (email: string): Promise<string> => {
    const res = await api.login(email).expect(403);
    return res.body.enrollment_token;
  };

  it('optional policy: login tokens carry no enrollment claim', async () => {
    await t.db.query(`UPDATE tenants SET mfa_policy = 'optional', mfa_required_since = NULL WHERE id = $1`, [tenant.id]);
    const u = await api.register();
    const res = await api.login(u.email).expect(200);
    expect(claimsOf(res.body.access_token).mfa_enrollment_required).toBeUndefined();
  });

  it('within the grace period login works and the access token carries mfa_enrollment_required: true', async () => {
    const u = await api.register();
    await userCreatedDaysAgo(u.userId, 60);
    await requireMfa(2, 7);
    const res = await api.login(u.email).expect(200);
    const claims = claimsOf(res.body.access_token);
    expect(claims.mfa_enrollment_required).toBe(true);
    expect(claims.aal).toBe('AAL1');
    // the deadline: 7 days after the switch to required (NumericDate)
    const deadline = Number(claims.mfa_enrollment_deadline);
    const expected = Math.floor(Date.now() / 1000) - 2 * DAY + 7 * DAY;
    expect(Math.abs(deadline - expected)).toBeLessThan(60);
    await api.me(res.body.access_token).expect(200);
    // a step-up token keeps the enrollment claims
    const stepped = await api.stepUp(res.body.access_token, { password: STRONG_PASSWORD }).expect(200);
    expect(claimsOf(stepped.body.access_token)).toMatchObject({ mfa_enrollment_required: true, mfa_enrollment_deadline: deadline });
  });

  it('a user created after the switch gets the whole grace from their creation', async () => {
    await requireMfa(30, 3);
    const u = await api.register();
    const res = await api.login(u.email).expect(200);
    expect(claimsOf(res.body.access_token).mfa_enrollment_required).toBe(true);
    await userCreatedDaysAgo(u.userId, 3.01);
    expect((await api.login(u.email).expect(403)).body.code).toBe('mfa/enrollment_required');
  });

  it("registration's own tokens say so too: the grace starts at registration", async () => {
    await requireMfa(30, 3);
    const u = await api.register();
    const claims = claimsOf(u.accessToken);
    expect(claims.mfa_enrollment_required).toBe(true);
    expect(Math.abs(Number(claims.mfa_enrollment_deadline) - (Math.floor(Date.now() / 1000) + 3 * DAY))).toBeLessThan(60);
  });

  it('a guest claimed by registering begins its account (and its grace) at the claim, whatever the age of the guest', async () => {
    await requireMfa(30, 3);
    await t.db.query(`UPDATE tenants SET anonymous_signins_enabled = true, anonymous_ever_enabled = true WHERE id = $1`, [tenant.id]);
    await t.tenantChanged(tenant.id);
    const g = await t.http().post('/v1/auth/anonymous').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', randomIp()).send({}).expect(201);
    await userCreatedDaysAgo(g.body.user.id, 10);
    const email = `claimed.${g.body.user.id.slice(0, 8)}@example.com`;
    const claimed = await t.http().post('/v1/auth/register').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', randomIp())
      .set('Authorization', `Bearer ${g.body.access_token}`).send({ email, password: STRONG_PASSWORD, consent: true }).expect(201);
    const deadline = Math.floor(Date.now() / 1000) + 3 * DAY;
    expect(claimsOf(claimed.body.access_token)).toMatchObject({ mfa_enrollment_required: true });
    expect(Math.abs(Number(claimsOf(claimed.body.access_token).mfa_enrollment_deadline) - deadline)).toBeLessThan(60);
    // refresh and sign-in count from the claim as well (not from the guest's creation)
    const r = await t.http().post('/v1/auth/refresh').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', randomIp()).send({ refresh_token: claimed.body.refresh_token }).expect(200);
    expect(Math.abs(Number(claimsOf(r.body.access_token).mfa_enrollment_deadline) - deadline)).toBeLessThan(60);
    const l = await api.login(email).expect(200);
    expect(Math.abs(Number(claimsOf(l.body.access_token).mfa_enrollment_deadline) - deadline)).toBeLessThan(60);
    // once the grace from the claim is over, the policy holds
    await t.db.query(`UPDATE users SET claimed_at = now() - make_interval(secs => $2) WHERE id = $1`, [g.body.user.id, 3.01 * DAY]);
    expect((await api.login(email).expect(403)).body.code).toBe('mfa/enrollment_required');
  });

  it('after the grace login answers 403 mfa/enrollment_required (problem+json) with an enrollment-only token', async () => {
    const u = await lockedOut();
    const res = await api.login(u.email).expect(403);
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(res.headers['cache-control']).toBe('no-store');
    expect(res.body).toEqual({
      type: 'about:blank',
      title: expect.any(String),
      status: 403,
      code: 'mfa/enrollment_required',
      detail: expect.any(String),
      enrollment_token: expect.any(String),
      enrollment_token_expires_in: 600,
      request_id: expect.any(String),
    });
    expect(res.body.access_token).toBeUndefined();
    const claims = claimsOf(res.body.enrollment_token);
    expect(claims).toMatchObject({
      sub: u.userId,
      tenant_id: tenant.id,
      scope: 'mfa:enroll',
      mfa_enrollment_only: true,
      aud: 'http://localhost:3001/v1/auth/mfa/totp',
      aal: 'AAL1',
    });
    expect(claims.sid).toBeUndefined();
    expect(Number(claims.exp) - Number(claims.iat)).toBe(600);
    // granted on the password just proved: its auth_time is the sign-in's, so it enrolls right away
    expect(Math.abs(Number(claims.auth_time) - Math.floor(Date.now() / 1000))).toBeLessThan(60);
    // a wrong password is still a plain 401 without a token
    const wrong = await api.login(u.email, 'wrong password!!').expect(401);
    expect(wrong.body.enrollment_token).toBeUndefined();
    // a pending (unverified) setup does not count as MFA
    await api.setup(await enrollmentToken(u.email)).expect(200);
    expect((await api.login(u.email).expect(403)).body.code).toBe('mfa/enrollment_required');
  });

  it('the enrollment-only token is refused everywhere but TOTP setup and verify-setup', async () => {
    const u = await lockedOut();
    const token = await enrollmentToken(u.email);
    const auth = { Authorization: `Bearer ${token}` };
    const refusals = [
      t.http().get('/v1/auth/me').set(auth),
      t.http().post('/v1/auth/logout').set(auth),
      t.http().post('/v1/auth/step-up/password').set(auth).send({ password: STRONG_PASSWORD }),
      t.http().post('/v1/auth/mfa/recovery-codes').set(auth).send({ code: '123456', password: STRONG_PASSWORD }),
      t.http().post('/v1/auth/mfa/disable').set(auth).send({ code: '123456', password: STRONG_PASSWORD }),
      t.http().get('/v1/users/me/agents').set(auth),
    ];
    for (const res of await Promise.all(refusals)) {
      expect(res.status).toBe(401);
      expect(res.body.code).toBe('auth/invalid_token');
      expect(res.headers['www-authenticate']).toMatch(/^Bearer error="invalid_token"/);
    }
    // resource servers introspecting it learn it is not an access token of the tenant
    const introspection = await t.http().post('/oauth/introspect').set('X-API-Key', tenant.apiKey).type('form').send({ token }).expect(200);
    expect(introspection.body).toEqual({ active: false });
    // another tenant's API key beside it: 401 auth/tenant_mismatch
    const mismatch = await t.http().post('/v1/auth/mfa/totp/setup').set(auth).set('X-API-Key', other.apiKey).expect(401);
    expect(mismatch.body.code).toBe('auth/tenant_mismatch');
    expect(mismatch.headers['www-authenticate']).toMatch(/^Bearer error="invalid_token"/);
    // a tampered enrollment token is refused by the enrollment guard too
    const [h, _p, s] = token.split('.');
    const forged = `${h}.${Buffer.from(JSON.stringify({ ...claimsOf(token), sub: '00000000-0000-4000-8000-000000000000' })).toString('base64url')}.${s}`;
    await t.http().post('/v1/auth/mfa/totp/setup').set('Authorization', `Bearer ${forged}`).expect(401);
  });

  it('the enrollment-only token enrolls TOTP; the next login is an MFA challenge and verify answers AAL2 tokens', async () => {
    const u = await lockedOut();
    const token = await enrollmentToken(u.email);
    const setup = await api.setup(token).set('X-API-Key', tenant.apiKey).expect(200);
    expect(setup.body.otpauth_url).toContain(encodeURIComponent(u.email));
    const device = new TotpDevice(setup.body.secret);
    const done = await api.verifySetup(token, { code: await device.next() }).expect(200);
    expect(done.body.recovery_codes).toHaveLength(10);
    // spent: it enrolled once (were MFA disabled later, it would not enroll another factor)
    expect((await api.setup(token).set('X-API-Key', tenant.apiKey).expect(401)).body.code).toBe('auth/invalid_token');
    const challenge = await api.challenge(u.email);
    const ok = await api.verify({ mfa_challenge_token: challenge, code: await device.next() }).expect(200);
    const claims = claimsOf(ok.body.access_token);
    expect(claims).toMatchObject({ aal: 'AAL2', amr: ['pwd', 'otp'], scope: 'openid profile email' });
    expect(claims.mfa_enrollment_required).toBeUndefined();
    expect(claims.mfa_enrollment_only).toBeUndefined();
    await api.me(ok.body.access_token).expect(200);
  });

  describe('refresh follows the policy too (a session started before the deadline cannot outlive it)', () => {
    const refresh = (rt: string) => t.http().post('/v1/auth/refresh').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', randomIp()).send({ refresh_token: rt });

    it('within the grace, refreshed tokens keep mfa_enrollment_required and the same deadline', async () => {
      const u = await api.register();
      await userCreatedDaysAgo(u.userId, 60);
      await requireMfa(2, 7);
      const signedIn = await api.login(u.email).expect(200);
      const refreshed = await refresh(signedIn.body.refresh_token).expect(200);
      const claims = claimsOf(refreshed.body.access_token);
      expect(claims.mfa_enrollment_required).toBe(true);
      expect(claims.mfa_enrollment_deadline).toBe(claimsOf(signedIn.body.access_token).mfa_enrollment_deadline);
    });

    /** A session signed in within the grace, whose grace then ends: its refresh's 403 answer. */
    async function refusedAfterGrace() {
      const u = await api.register();
      await userCreatedDaysAgo(u.userId, 60);
      await requireMfa(2, 7);
      const signedIn = await api.login(u.email).expect(200);
      // the grace ends while the session is open
      await requireMfa(10, 3);
      return { u, signedIn, res: await refresh(signedIn.body.refresh_token).expect(403) };
    }

    it('after the deadline refresh answers 403 mfa/enrollment_required with an enrollment-only token and keeps the refresh token', async () => {
      const { u, signedIn, res } = await refusedAfterGrace();
      expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(res.body).toMatchObject({ code: 'mfa/enrollment_required', enrollment_token: expect.any(String), enrollment_token_expires_in: 600 });
      expect(res.body.access_token).toBeUndefined();
      expect(claimsOf(res.body.enrollment_token)).toMatchObject({ sub: u.userId, scope: 'mfa:enroll', mfa_enrollment_only: true });
      // nothing was rotated: once the user enrolled with the session's own enrollment-only token
      // (it names the session), the same refresh token continues the session
      expect(claimsOf(res.body.enrollment_token).sid).toBe(claimsOf(signedIn.body.access_token).sid);
      const device = new TotpDevice((await api.setup(res.body.enrollment_token).expect(200)).body.secret);
      await api.verifySetup(res.body.enrollment_token, { code: await device.next() }).expect(200);
      const after = await refresh(signedIn.body.refresh_token).expect(200);
      expect(claimsOf(after.body.access_token).mfa_enrollment_required).toBeUndefined();
    });

    it("a refresh's enrollment-only token ends with its session (a logout of it): it enrolls nothing after", async () => {
      const { u, signedIn, res } = await refusedAfterGrace();
      await t.http().post('/v1/auth/logout').set('Authorization', `Bearer ${signedIn.body.access_token}`).expect(204);
      await api.setup(res.body.enrollment_token).expect(401);
      expect(await t.db.query(`SELECT 1 FROM user_mfa_factors WHERE user_id = $1`, [u.userId])).toHaveLength(0);
    });

    it("a refresh's enrollment-only token carries the session's sign-in: of an old session it does not start enrollment (403 auth/step_up_required); a password sign-in's does", async () => {
      const u = await api.register();
      await userCreatedDaysAgo(u.userId, 60);
      await requireMfa(2, 7);
      const signedIn = await api.login(u.email).expect(200);
      const signedInAt = await api.backdateSignIn(signedIn.body.access_token, 3600);
      await requireMfa(10, 3);
      const res = await refresh(signedIn.body.refresh_token).expect(403);
      expect(res.body.code).toBe('mfa/enrollment_required');
      // a refresh token alone proves nobody is there now
      const fromRefresh = res.body.enrollment_token as string;
      expect(claimsOf(fromRefresh)).toMatchObject({ mfa_enrollment_only: true, auth_time: signedInAt });
      expect(claimsOf(fromRefresh).step_up_at).toBeUndefined();
      const refused = await api.setup(fromRefresh).expect(403);
      expect(refused.body.code).toBe('auth/step_up_required');
      expect(refused.body.detail).toMatch(/^Sign in again/);
      expect(await t.db.query(`SELECT 1 FROM user_mfa_factors WHERE user_id = $1`, [u.userId])).toHaveLength(0);
      // the user signs in with the password again and enrolls: that sign-in opened no session, and
      // the old one, password only (AAL1) and not the enrolling one, ends with the factor turned on
      const token = await enrollmentToken(u.email);
      const device = new TotpDevice((await api.setup(token).expect(200)).body.secret);
      await api.verifySetup(token, { code: await device.next() }).expect(200);
      expect((await refresh(signedIn.body.refresh_token).expect(401)).body.code).toBe('auth/invalid_refresh_token');
    });

    it("a sign-in's enrollment-only token starts enrollment for its whole lifetime (600 s), longer than the 300 s a regular token's sign-in counts (review); one minted later than its proof has the 300 s", async () => {
      const u = await lockedOut();
      const user = { id: u.userId, tenant_id: tenant.id, email: u.email, email_verified: false, is_anonymous: false, role: 'user', created_at: new Date() };
      /** A token minted at a sign-in `mintedSecondsAgo` (its clock moved back), recording a sign-in `signedInSecondsAgo`. */
      const issue = async (mintedSecondsAgo: number, signedInSecondsAgo: number) => {
        const now = Date.now();
        const clock = jest.spyOn(Date, 'now').mockReturnValue(now - mintedSecondsAgo * 1000);
        try {
          return (await t.app.get(EnrollmentTokenService).issue(user, { auth_time: Math.floor(now / 1000) - signedInSecondsAgo }))!.token;
        } finally {
          clock.mockRestore();
        }
      };
      // minted at the sign-in, 400 s ago: past a regular token's 300 s, within the token's own 600 s
      await api.setup(await issue(400, 400)).expect(200);
      // minted now on a sign-in of 400 s ago (as a refresh mints it): the route's 300 s
      const late = await api.setup(await issue(0, 400)).expect(403);
      expect(late.body).toMatchObject({ code: 'auth/step_up_required', detail: expect.stringMatching(/^Sign in again/) });
      // minted at a sign-in 590 s ago: still within its lifetime
      await api.setup(await issue(590, 590)).expect(200);
    });

    it('step-up follows it as well: within the grace its token says so with the deadline of now; after the deadline it answers the 403, so step-ups cannot keep a session going', async () => {
      const u = await api.register();
      await userCreatedDaysAgo(u.userId, 60);
      await requireMfa(2, 7);
      const signedIn = await api.login(u.email).expect(200);
      const stepped = await api.stepUp(signedIn.body.access_token, { password: STRONG_PASSWORD }).expect(200);
      expect(claimsOf(stepped.body.access_token)).toMatchObject({ mfa_enrollment_required: true, mfa_enrollment_deadline: claimsOf(signedIn.body.access_token).mfa_enrollment_deadline });
      // the grace ends while the session is open: a step-up with a token still unexpired mints nothing
      await requireMfa(10, 3);
      for (const token of [signedIn.body.access_token, stepped.body.access_token]) {
        const res = await api.stepUp(token, { password: STRONG_PASSWORD }).expect(403);
        expect(res.body).toMatchObject({ code: 'mfa/enrollment_required', enrollment_token: expect.any(String) });
        expect(res.body.access_token).toBeUndefined();
        // granted on the password the step-up just proved (step_up_at), so it may start enrollment
        expect(Math.abs(Number(claimsOf(res.body.enrollment_token).step_up_at) - Math.floor(Date.now() / 1000))).toBeLessThan(60);
      }
      // a user of a tenant whose policy is optional again steps up without enrollment claims
      await t.db.query(`UPDATE tenants SET mfa_policy = 'optional' WHERE id = $1`, [tenant.id]);
      const plain = await api.stepUp(stepped.body.access_token, { password: STRONG_PASSWORD }).expect(200);
      expect(claimsOf(plain.body.access_token).mfa_enrollment_required).toBeUndefined();
      expect(claimsOf(plain.body.access_token).step_up_at).toEqual(expect.any(Number));
    });

    it('a replayed refresh token still ends the session after the deadline (reuse detection first)', async () => {
      const u = await api.register();
      await userCreatedDaysAgo(u.userId, 60);
      await requireMfa(2, 7);
      const first = (await api.login(u.email).expect(200)).body.refresh_token;
      const second = (await refresh(first).expect(200)).body.refresh_token;
      await refresh(second).expect(200); // the first token's child is used: the first is now a replay
      await requireMfa(10, 3);
      expect((await refresh(first).expect(401)).body.code).toBe('auth/invalid_refresh_token');
      const [session] = await t.db.query<{ revoked_reason: string }>(
        `SELECT s.revoked_reason FROM user_sessions s JOIN refresh_tokens r ON r.session_id = s.id WHERE r.id = $1`,
        [first.split(':')[0]],
      );
      expect(session.revoked_reason).toBe('refresh_token_reuse');
    });

    it("the deadline is the database's: with this process's clock behind it, a refresh just past it answers 403 after one rotate statement (it looped on rotating until the clocks agreed)", async () => {
      const u = await api.register();
      await userCreatedDaysAgo(u.userId, 60);
      await requireMfa(2, 7);
      const signedIn = await api.login(u.email).expect(200);
      // a grace of 3 days that ended 1 s ago by PostgreSQL's clock
      await t.db.query(`UPDATE tenants SET mfa_required_since = now() - make_interval(secs => $2), mfa_grace_period_days = 3 WHERE id = $1`, [tenant.id, 3 * DAY + 1]);
      const real = Date.now.bind(Date);
      // this process's clock (the API's) 4 s behind
      const clock = jest.spyOn(Date, 'now').mockImplementation(() => real() - 4000);
      let res: { status: number; body: { code?: string } } | undefined;
      let rotates: string[];
      try {
        rotates = await namedQueryParams(t.db, 'refresh_rotate_batch', async () => {
          res = await refresh(signedIn.body.refresh_token);
        });
      } finally {
        clock.mockRestore();
      }
      expect([res?.status, res?.body.code, rotates.length]).toEqual([403, 'mfa/enrollment_required', 1]);
    });

    it('guests and users of optional tenants refresh as before', async () => {
      await requireMfa(10, 3);
      await t.db.query(`UPDATE tenants SET anonymous_signins_enabled = true, anonymous_ever_enabled = true WHERE id = $1`, [tenant.id]);
      await t.tenantChanged(tenant.id);
      const g = await t.http().post('/v1/auth/anonymous').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', randomIp()).send({}).expect(201);
      const r = await refresh(g.body.refresh_token).expect(200);
      expect(claimsOf(r.body.access_token).mfa_enrollment_required).toBeUndefined();
      const o = await mfaApi(t, other).register();
      await userCreatedDaysAgo(o.userId, 60);
      const signedIn = await mfaApi(t, other).login(o.email).expect(200);
      await t.http().post('/v1/auth/refresh').set('X-API-Key', other.apiKey).set('X-Forwarded-For', randomIp()).send({ refresh_token: signedIn.body.refresh_token }).expect(200);
    });
  });

  it('an MFA user under the required policy gets the challenge (grace or not)', async () => {
    const u = await api.enrolledUser();
    await userCreatedDaysAgo(u.userId, 60);
    await requireMfa(10, 3);
    const res = await api.login(u.email).expect(200);
    expect(res.body).toEqual({ mfa_required: true, mfa_challenge_token: expect.any(String) });
  });

  it("the policy is per tenant: another tenant's users are unaffected", async () => {
    await requireMfa(10, 3);
    const otherApi = mfaApi(t, other);
    const u = await otherApi.register();
    await userCreatedDaysAgo(u.userId, 60);
    const res = await t.http().post('/v1/auth/login').set('X-API-Key', other.apiKey).set('X-Forwarded-For', randomIp()).send({ email: u.email, password: u.password }).expect(200);
    expect(claimsOf(res.body.access_token).mfa_enrollment_required).toBeUndefined();
  });
});
