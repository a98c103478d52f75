import { MfaLoginPolicy } from '../../../src/modules/mfa/mfa-login-policy.service';
import { SessionUser } from '../../../src/modules/sessions/sessions.service';
import { JwtService } from '../../../src/shared/crypto/jwt.service';
import { createTestApp, randomIp, STRONG_PASSWORD, TestApp } from '../../setup/app';
import { createTenant, TenantFixture } from '../../factories/tenant.factory';
import { claimsOf, codeAt, currentStep, mfaApi, TotpDevice } from './mfa.helpers';
import { mfaThrottleRealm } from '../../../src/modules/mfa/mfa-throttle';
import { expectedKeySubject } from '../../setup/client-hash';
import { rawRedis } from '../agents/agents.helpers';

// a test may wait for the next 30 s TOTP step when it needs more codes than the window holds
jest.setTimeout(90_000);

describe('TOTP MFA (issue 5 item 5; spec 2.2 Mfa* schemas; contract "Account security flows")', () => {
  let t: TestApp;
  let tenant: TenantFixture;
  let other: TenantFixture;
  let api: ReturnType<typeof mfaApi>;
  beforeAll(async () => {
    t = await createTestApp();
    tenant = await createTenant(t.db);
    other = await createTenant(t.db);
    await t.db.query(`UPDATE tenants SET name = 'Acme & Co: EU' WHERE id = $1`, [tenant.id]);
    await t.tenantChanged(tenant.id);
    api = mfaApi(t, tenant);
  });
  afterAll(() => t.close());

  /** The MFA notices mailed to the user (outbox `mfa_changed`, to the user's address), oldest first. */
  const mfaNotices = async (userId: string): Promise<string[]> =>
    (
      await t.db.query<{ change: string }>(
        `SELECT o.payload->'data'->>'change' AS change FROM outbox o JOIN users u ON u.email = o.payload->>'to' AND u.tenant_id = o.tenant_id
          WHERE o.topic = 'email' AND o.payload->>'template' = 'mfa_changed' AND u.id = $1 ORDER BY o.id`,
        [userId],
      )
    ).map((r) => r.change);

  describe('enrollment', () => {
    it('setup answers a 20-byte base32 seed without padding and its otpauth URL; the seed is stored envelope-encrypted and pending', async () => {
      const u = await api.register();
      const res = await api.setup(u.accessToken).expect(200);
      expect(res.body).toEqual({ secret: expect.stringMatching(/^[A-Z2-7]{32}$/), otpauth_url: expect.any(String) });
      const { secret, otpauth_url: url } = res.body;
      expect(Buffer.from(base32Decode(secret)).length).toBe(20);
      expect(url).toBe(
        // the tenant "Acme & Co: EU": no colon in the label's issuer (apps split the label at the first one)
        `otpauth://totp/Acme%20%26%20Co%20EU:${encodeURIComponent(u.email)}?secret=${secret}&issuer=Acme%20%26%20Co%20EU&algorithm=SHA1&digits=6&period=30`,
      );
      expect(url).not.toContain('=&');
      expect(new URL(url).searchParams.get('secret')).toBe(secret);
      const rows = await t.db.query<Record<string, unknown>>(`SELECT * FROM user_mfa_factors WHERE user_id = $1`, [u.userId]);
      expect(rows).toHaveLength(1);
      expect(rows[0].enabled_at).toBeNull();
      expect(rows[0].tenant_id).toBe(tenant.id);
      expect(String(rows[0].secret_enc)).toMatch(/^v1\./);
      const dump = JSON.stringify(rows[0]);
      expect(dump).not.toContain(secret);
      expect(dump).not.toContain(secret.toLowerCase());
      // pending: password login still answers tokens
      const login = await api.login(u.email).expect(200);
      expect(login.body.access_token).toEqual(expect.any(String));
    });

    it('only the session that started an enrollment completes it: another session of the user (too old to start one) gets 409 mfa/setup_required, even with the right code, and uses none of the MFA failure allowance', async () => {
      const owner = await api.register();
      const stale = (await api.login(owner.email).expect(200)).body;
      await api.backdateSignIn(stale.access_token, 3600);
      const staleToken = (await api.refresh(stale.refresh_token).expect(200)).body.access_token as string;
      await api.setup(staleToken).expect(403);
      const { secret } = (await api.setup(owner.accessToken).expect(200)).body;
      const right = await api.verifySetup(staleToken, { code: codeAt(secret, currentStep()) }).expect(409);
      expect(right.body.code).toBe('mfa/setup_required');
      // more wrong codes than MFA_FAILURES_PER_ACCOUNT (10), from one address: none is judged or counted
      const ip = randomIp();
      for (let i = 0; i < 12; i++) {
        const r = await t.http().post('/v1/auth/mfa/totp/verify-setup').set('Authorization', `Bearer ${staleToken}`).set('X-Forwarded-For', ip).send({ code: '000000' });
        expect([r.status, r.body.code]).toEqual([409, 'mfa/setup_required']);
      }
      expect(await t.db.query(`SELECT 1 FROM user_mfa_factors WHERE user_id = $1 AND enabled_at IS NOT NULL`, [owner.userId])).toHaveLength(0);
      // the owner's session completes it (a refreshed token of that session too)
      const refreshed = (await api.refresh(owner.refreshToken).expect(200)).body.access_token as string;
      await api.verifySetup(refreshed, { code: codeAt(secret, currentStep()) }).expect(200);
    });

    it("turning TOTP on ends the user's other sessions below AAL2 (refresh and access tokens refused at once); the enrolling session and MFA sessions go on", async () => {
      const u = await api.register(); // session A: enrolls
      const before = (await api.login(u.email).expect(200)).body; // session B: password only (a stolen one, say)
      const setup = await api.setup(u.accessToken).expect(200);
      const device = new TotpDevice(setup.body.secret);
      await api.verifySetup(u.accessToken, { code: await device.next() }).expect(200);
      expect((await api.me(before.access_token).expect(401)).headers['www-authenticate']).toMatch(/invalid_token/);
      expect((await api.refresh(before.refresh_token).expect(401)).body.code).toBe('auth/invalid_refresh_token');
      await api.me(u.accessToken).expect(200);
      const a = (await api.refresh(u.refreshToken).expect(200)).body;
      const [enabled] = await t.db.query<{ metadata: { sessions_ended: number } }>(`SELECT metadata FROM audit_events WHERE type = 'user.mfa_enabled' AND target_id = $1`, [u.userId]);
      expect(enabled.metadata.sessions_ended).toBe(1);
      const [ended] = await t.db.query<{ revoked_reason: string }>(`SELECT revoked_reason FROM user_sessions WHERE id = $1`, [claimsOf(before.access_token).sid]);
      expect(ended.revoked_reason).toBe('mfa_enabled');

      // turned off and on again (from session A): a session that passed the factor (C, AAL2) goes on,
      // one opened with the password alone while it was off (D) ends
      const mfaUser = { ...u, device, recoveryCodes: [] };
      const c = await api.signIn(mfaUser);
      await api.disable(await api.steppedUp(c.access_token), { code: await device.next(), password: STRONG_PASSWORD }).expect(204);
      const d = (await api.login(u.email).expect(200)).body;
      const again = new TotpDevice((await api.setup(a.access_token).expect(200)).body.secret);
      await api.verifySetup(a.access_token, { code: await again.next() }).expect(200);
      await api.me(c.access_token).expect(200);
      await api.refresh(c.refresh_token).expect(200);
      await api.me(d.access_token).expect(401);
      await api.refresh(d.refresh_token).expect(401);
      await api.refresh(a.refresh_token).expect(200);
    });

    it('verify-setup with an otplib code enables TOTP and answers 10 single-use recovery codes, stored hashed', async () => {
      const u = await api.register();
      const { body } = await api.setup(u.accessToken).expect(200);
      const res = await api.verifySetup(u.accessToken, { code: codeAt(body.secret, currentStep()) }).expect(200);
      expect(Object.keys(res.body)).toEqual(['recovery_codes']);
      expect(res.body.recovery_codes).toHaveLength(10);
      expect(new Set(res.body.recovery_codes).size).toBe(10);
      for (const c of res.body.recovery_codes) expect(c).toMatch(/^[a-z2-9]{5}-[a-z2-9]{5}$/);
      const [f] = await t.db.query<{ enabled_at: Date | null }>(`SELECT enabled_at FROM user_mfa_factors WHERE user_id = $1`, [u.userId]);
      expect(f.enabled_at).toBeInstanceOf(Date);
      const stored = await t.db.query<{ code_hash: string; used_at: Date | null }>(`SELECT code_hash, used_at FROM mfa_recovery_codes WHERE user_id = $1`, [u.userId]);
      expect(stored).toHaveLength(10);
      const dump = JSON.stringify(stored);
      for (const c of res.body.recovery_codes) {
        expect(dump).not.toContain(c);
        expect(dump).not.toContain(c.replace('-', ''));
      }
      for (const r of stored) expect(r.code_hash).toMatch(/^[0-9a-f]{64}$/);
      // the user is told by email (outbox, same transaction), as of a password change
      expect(await mfaNotices(u.userId)).toEqual(['enabled']);
      // enabled: setup and verify-setup again are 409 mfa/already_enabled
      expect((await api.setup(u.accessToken).expect(409)).body.code).toBe('mfa/already_enabled');
      expect((await api.verifySetup(u.accessToken, { code: '123456' }).expect(409)).body.code).toBe('mfa/already_enabled');
    });

    it('a wrong code does not enable; a second setup replaces the pending seed (codes of the old seed stop working)', async () => {
      const u = await api.register();
      const first = await api.setup(u.accessToken).expect(200);
      const second = await api.setup(u.accessToken).expect(200);
      expect(second.body.secret).not.toBe(first.body.secret);
      const oldCode = codeAt(first.body.secret, currentStep());
      if (oldCode !== codeAt(second.body.secret, currentStep())) {
        const bad = await api.verifySetup(u.accessToken, { code: oldCode }).expect(401);
        expect(bad.body.code).toBe('mfa/invalid_code');
      }
      const [f] = await t.db.query<{ enabled_at: Date | null }>(`SELECT enabled_at FROM user_mfa_factors WHERE user_id = $1`, [u.userId]);
      expect(f.enabled_at).toBeNull();
      await api.verifySetup(u.accessToken, { code: codeAt(second.body.secret, currentStep()) }).expect(200);
    });

    it('verify-setup before setup is 409 mfa/setup_required', async () => {
      const u = await api.register();
      expect((await api.verifySetup(u.accessToken, { code: '123456' }).expect(409)).body.code).toBe('mfa/setup_required');
      // not a wrong code: repeated, it is never counted as a failed attempt (no 429)
      for (let i = 0; i < 6; i++) {
        const again = await t.http().post('/v1/auth/mfa/totp/verify-setup').set('Authorization', `Bearer ${u.accessToken}`).set('X-Forwarded-For', '203.0.113.77').send({ code: '123456' });
        expect(again.body.code).toBe('mfa/setup_required');
      }
    });

    describe('setup needs a sign-in or step-up in the last 5 minutes (a stolen session alone cannot enroll a factor of its own)', () => {
      const seeds = async (userId: string) => ({
        factors: (await t.db.query(`SELECT 1 FROM user_mfa_factors WHERE user_id = $1`, [userId])).length,
        started: (await t.db.query(`SELECT 1 FROM audit_events WHERE type = 'user.mfa_setup_started' AND target_id = $1`, [userId])).length,
      });

      it('a token whose sign-in is older than 300 s gets 403 auth/step_up_required and no pending seed; stepped up, the same user enrolls', async () => {
        const u = await api.register();
        const signedInAt = await api.backdateSignIn(u.accessToken, 301);
        const refreshed = await api.refresh(u.refreshToken).expect(200);
        const old = refreshed.body.access_token as string;
        expect(claimsOf(old).auth_time).toBe(signedInAt);
        const res = await api.setup(old).expect(403);
        expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
        expect(res.body.code).toBe('auth/step_up_required');
        expect(await seeds(u.userId)).toEqual({ factors: 0, started: 0 });
        // verify-setup has no check of its own: without a seed from setup there is nothing to complete
        expect((await api.verifySetup(old, { code: '123456' }).expect(409)).body.code).toBe('mfa/setup_required');
        // a step-up older than 300 s does not count either
        const { iss: _i, aud: _a, exp: _e, iat: _t, jti: _j, ...rest } = claimsOf(old);
        const staleStepUp = { ...rest, step_up_at: Math.floor(Date.now() / 1000) - 301 } as unknown as Parameters<JwtService['sign']>[0];
        expect((await api.setup((await t.app.get(JwtService).sign(staleStepUp)).token).expect(403)).body.code).toBe('auth/step_up_required');
        expect(await seeds(u.userId)).toEqual({ factors: 0, started: 0 });

        // the client steps up and retries
        const stepped = await api.steppedUp(old);
        const setup = await api.setup(stepped).expect(200);
        await api.verifySetup(stepped, { code: codeAt(setup.body.secret, currentStep()) }).expect(200);
        expect(await mfaNotices(u.userId)).toEqual(['enabled']);
      });

      it('a fresh sign-in enrolls right away (registration and login alike), and one 240 s old still does', async () => {
        const u = await api.register();
        await api.setup(u.accessToken).expect(200);
        const login = await api.login(u.email).expect(200);
        await api.setup(login.body.access_token).expect(200);
        await api.backdateSignIn(login.body.access_token, 240);
        const refreshed = await api.refresh(login.body.refresh_token).expect(200);
        const setup = await api.setup(refreshed.body.access_token).expect(200);
        await api.verifySetup(refreshed.body.access_token, { code: codeAt(setup.body.secret, currentStep()) }).expect(200);
      });
    });

    it('guests cannot enroll (403); every MFA endpoint needs a bearer token (401)', async () => {
      const guestTenant = await createTenant(t.db, { anonymous_signins_enabled: true });
      const guest = await t.http().post('/v1/auth/anonymous').set('X-API-Key', guestTenant.apiKey).set('X-Forwarded-For', randomIp()).send({}).expect(201);
      expect((await api.setup(guest.body.access_token).expect(403)).body.code).toBe('auth/forbidden');
      expect((await api.verifySetup(guest.body.access_token, { code: '123456' }).expect(403)).body.code).toBe('auth/forbidden');
      expect((await api.stepUp(guest.body.access_token, { password: STRONG_PASSWORD }).expect(403)).body.code).toBe('auth/forbidden');
      expect((await api.regenerate(guest.body.access_token, { code: '123456', password: STRONG_PASSWORD }).expect(403)).body.code).toBe('auth/forbidden');
      for (const path of ['/v1/auth/mfa/totp/setup', '/v1/auth/mfa/totp/verify-setup', '/v1/auth/mfa/disable', '/v1/auth/mfa/recovery-codes', '/v1/auth/step-up/password']) {
        const res = await t.http().post(path).send({}).expect(401);
        expect(res.headers['www-authenticate']).toMatch(/^Bearer/);
      }
    });

    it.each([
      ['code missing', {}],
      ['code of 5 digits', { code: '12345' }],
      ['code of 7 digits', { code: '1234567' }],
      ['code with letters', { code: '12345a' }],
      ['code with spaces', { code: '123 456' }],
      ['code as a number', { code: 123456 }],
      ['a recovery code', { code: 'abcde-fghij' }],
      ['an extra property', { code: '123456', remember: true }],
    ])('verify-setup rejects %s with 400 request/invalid (MfaVerifySetupRequest)', async (_n, body) => {
      const u = await api.register();
      await api.setup(u.accessToken).expect(200);
      const res = await api.verifySetup(u.accessToken, body).expect(400);
      expect(res.body.code).toBe('request/invalid');
      expect(res.body.errors.map((e: { field: string }) => e.field)).toContain(Object.keys(body).find((k) => k !== 'code') ?? 'code');
    });
  });

  describe('sign-in with MFA', () => {
    it('a password change voids the challenges its old password had opened (no session from them afterwards)', async () => {
      const u = await api.enrolledUser();
      const pending = await api.challenge(u.email);
      const session = await api.signIn(u);
      await t.http().post('/v1/auth/password/change').set('Authorization', `Bearer ${session.access_token}`).set('X-Forwarded-For', randomIp())
        .send({ current_password: STRONG_PASSWORD, new_password: 'an entirely new passphrase' }).expect(204);
      const late = await api.verify({ mfa_challenge_token: pending, code: u.recoveryCodes[0] }).expect(401);
      expect(late.body.code).toBe('mfa/invalid_challenge');
      // the new password opens a challenge as before
      const fresh = await api.challenge(u.email, 'an entirely new passphrase');
      await api.verify({ mfa_challenge_token: fresh, code: u.recoveryCodes[1] }).expect(200);
    });

    it('login answers only {mfa_required, mfa_challenge_token}; verify with a TOTP code answers tokens with aal AAL2 and amr [pwd, otp]', async () => {
      const u = await api.enrolledUser();
      const res = await api.login(u.email).expect(200);
      expect(res.body).toEqual({ mfa_required: true, mfa_challenge_token: expect.any(String) });
      const [c] = await t.db.query<{ token_hash: string; expires_at: Date; created_at: Date; kind: string }>(
        `SELECT token_hash, expires_at, created_at, kind FROM mfa_challenges WHERE user_id = $1`,
        [u.userId],
      );
      expect(c.token_hash).not.toBe(res.body.mfa_challenge_token);
      expect(c.token_hash).toMatch(/^[0-9a-f]{64}$/);
      expect(c.kind).toBe('login');
      expect(c.expires_at.getTime() - c.created_at.getTime()).toBe(300_000);

      const ok = await api.verify({ mfa_challenge_token: res.body.mfa_challenge_token, code: await u.device.next() }).expect(200);
      expect(ok.body).toEqual({
        access_token: expect.any(String),
        refresh_token: expect.any(String),
        expires_in: 900,
        token_type: 'Bearer',
        user: { id: u.userId, email: u.email, email_verified: false, is_anonymous: false, created_at: expect.any(String) },
      });
      const claims = claimsOf(ok.body.access_token);
      expect(claims).toMatchObject({ sub: u.userId, tenant_id: tenant.id, aal: 'AAL2', amr: ['pwd', 'otp'] });
      expect(claims.mfa_enrollment_required).toBeUndefined();
      await api.me(ok.body.access_token).expect(200);
      const [s] = await t.db.query<{ aal: string; amr: string[] }>(`SELECT aal, amr FROM user_sessions WHERE id = $1`, [claims.sid]);
      expect(s).toEqual({ aal: 'AAL2', amr: ['pwd', 'otp'] });
      // the session stays AAL2 across refresh
      const refreshed = await t.http().post('/v1/auth/refresh').set('X-API-Key', tenant.apiKey).send({ refresh_token: ok.body.refresh_token }).expect(200);
      expect(claimsOf(refreshed.body.access_token)).toMatchObject({ aal: 'AAL2', amr: ['pwd', 'otp'], sid: claims.sid });
      // a wrong password still answers 401 without a challenge
      expect((await api.login(u.email, 'wrong password!!').expect(401)).body.code).toBe('auth/invalid_credentials');
    });

    it('a challenge of a passwordless first factor (LoginPolicy caller naming its amr) keeps that amr: [email, otp]', async () => {
      const u = await api.enrolledUser();
      const [row] = await t.db.query<SessionUser>(`SELECT id, tenant_id, email, email_verified, is_anonymous, role, created_at FROM users WHERE id = $1`, [u.userId]);
      const decision = await t.app.get(MfaLoginPolicy).decide(row, { amr: ['email'] });
      const token = decision?.challenge?.mfa_challenge_token;
      expect(token).toEqual(expect.any(String));
      // a magic link's challenge completes only while the tenant has magic links on
      await t.db.query(`UPDATE tenants SET magic_link_enabled = true WHERE id = $1`, [tenant.id]);
      try {
        const ok = await api.verify({ mfa_challenge_token: token!, code: await u.device.next() }).expect(200);
        expect(claimsOf(ok.body.access_token)).toMatchObject({ aal: 'AAL2', amr: ['email', 'otp'] });
      } finally {
        await t.db.query(`UPDATE tenants SET magic_link_enabled = false WHERE id = $1`, [tenant.id]);
      }
    });

    it('a TOTP code already used in its time step is rejected (replay), also on a new challenge', async () => {
      const u = await api.enrolledUser();
      const code = await u.device.next();
      await api.verify({ mfa_challenge_token: await api.challenge(u.email), code }).expect(200);
      const replay = await api.verify({ mfa_challenge_token: await api.challenge(u.email), code }).expect(401);
      expect(replay.body.code).toBe('mfa/invalid_code');
      // the setup code's step counts as used too
      const setupStep = u.device.used[0];
      const old = await api.verify({ mfa_challenge_token: await api.challenge(u.email), code: codeAt(u.device.secret, setupStep) }).expect(401);
      expect(old.body.code).toBe('mfa/invalid_code');
    });

    it('parallel verifications with the same code: exactly one session', async () => {
      const u = await api.enrolledUser();
      const code = await u.device.next();
      const challenges = await Promise.all(Array.from({ length: 5 }, () => api.challenge(u.email)));
      const results = await Promise.all(challenges.map((c) => api.verify({ mfa_challenge_token: c, code })));
      expect(results.filter((r) => r.status === 200)).toHaveLength(1);
      for (const r of results.filter((x) => x.status !== 200)) expect(r.body.code).toBe('mfa/invalid_code');
    });

    it('one challenge sent 5 times in parallel with the right code: one session; the duplicates judged no code, so none counts as a failure', async () => {
      const u = await api.enrolledUser();
      const challenge = await api.challenge(u.email);
      const code = await u.device.next();
      const ip = randomIp();
      const results = await Promise.all(Array.from({ length: 5 }, () => api.verify({ mfa_challenge_token: challenge, code }, tenant.apiKey, ip)));
      expect(results.filter((r) => r.status === 200)).toHaveLength(1);
      for (const r of results.filter((x) => x.status !== 200)) expect(r.body.code).toBe('mfa/invalid_challenge');
      // the MFA failure counters of the account and of the address (login-throttle.service.ts keys)
      const redis = rawRedis();
      try {
        const prefix = process.env.REDIS_KEY_PREFIX as string;
        const account = expectedKeySubject(`${mfaThrottleRealm(tenant.id)}:${u.userId}`);
        const hits = async () => Number((await redis.get(`${prefix}{rl:acct:${account}:login-fail}:hits`)) ?? 0);
        expect(await hits()).toBe(0);
        // the key read above is the account's live counter: a wrong code counts in it
        const wrong = String((Number(code) + 1) % 1_000_000).padStart(6, '0');
        await api.verify({ mfa_challenge_token: await api.challenge(u.email), code: wrong }, tenant.apiKey, ip).expect(401);
        expect(await hits()).toBe(1);
      } finally {
        redis.disconnect();
      }
    });

    it('a verify racing a password change that ends the challenges waits for it and is refused, never a deadlock', async () => {
      const u = await api.enrolledUser();
      const challenge = await api.challenge(u.email);
      const code = await u.device.next();
      // what a password change does: the user's row, then the user's pending challenges
      const outcome = await t.db.tx(async (tx) => {
        await tx.query(`SELECT 1 FROM users WHERE id = $1 FOR NO KEY UPDATE`, [u.userId]);
        const verify = api.verify({ mfa_challenge_token: challenge, code }).then((r) => r);
        await new Promise((r) => setTimeout(r, 300));
        await tx.query(`DELETE FROM mfa_challenges WHERE user_id = $1 AND used_at IS NULL`, [u.userId]);
        return { verify }; // not the promise itself: the transaction must commit before it is awaited
      });
      const res = await outcome.verify;
      expect([res.status, res.body.code]).toEqual([401, 'mfa/invalid_challenge']);
    });

    it('a recovery code signs in once (amr [pwd, recovery]); case, spaces and hyphens do not matter', async () => {
      const u = await api.enrolledUser();
      const [first, second] = u.recoveryCodes;
      const ok = await api.verify({ mfa_challenge_token: await api.challenge(u.email), code: first }).expect(200);
      expect(claimsOf(ok.body.access_token)).toMatchObject({ aal: 'AAL2', amr: ['pwd', 'recovery'] });
      const again = await api.verify({ mfa_challenge_token: await api.challenge(u.email), code: first }).expect(401);
      expect(again.body.code).toBe('mfa/invalid_code');
      await api.verify({ mfa_challenge_token: await api.challenge(u.email), code: ` ${second.replace('-', '').toUpperCase()} ` }).expect(200);
      const used = await t.db.query(`SELECT 1 FROM mfa_recovery_codes WHERE user_id = $1 AND used_at IS NOT NULL`, [u.userId]);
      expect(used).toHaveLength(2);
      // another user's recovery code is worthless here
      const v = await api.enrolledUser();
      await api.verify({ mfa_challenge_token: await api.challenge(u.email), code: v.recoveryCodes[0] }).expect(401);
    });

    it('5 wrong codes kill the challenge: even the right code is refused afterwards', async () => {
      const u = await api.enrolledUser();
      const token = await api.challenge(u.email);
      for (let i = 0; i < 5; i++) {
        const res = await api.verify({ mfa_challenge_token: token, code: wrongCode(u) }).expect(401);
        expect(res.body.code).toBe('mfa/invalid_code');
      }
      const dead = await api.verify({ mfa_challenge_token: token, code: await u.device.next() }).expect(401);
      expect(dead.body.code).toBe('mfa/invalid_challenge');
      // a new challenge works with a fresh code
      await api.verify({ mfa_challenge_token: await api.challenge(u.email), code: await u.device.next() }).expect(200);
    });

    it('30 parallel wrong codes on one challenge: at most 5 are evaluated', async () => {
      const u = await api.enrolledUser();
      const token = await api.challenge(u.email);
      const results = await Promise.all(Array.from({ length: 30 }, () => api.verify({ mfa_challenge_token: token, code: wrongCode(u) })));
      const codes = results.map((r) => r.body.code);
      expect(results.every((r) => r.status === 401)).toBe(true);
      expect(codes.filter((c) => c === 'mfa/invalid_code')).toHaveLength(5);
      expect(codes.filter((c) => c === 'mfa/invalid_challenge')).toHaveLength(25);
      const [c] = await t.db.query<{ attempts: number; used_at: Date | null }>(`SELECT attempts, used_at FROM mfa_challenges WHERE user_id = $1`, [u.userId]);
      expect(c).toEqual({ attempts: 5, used_at: null });
    });

    it('the challenge token is single use', async () => {
      const u = await api.enrolledUser();
      const token = await api.challenge(u.email);
      await api.verify({ mfa_challenge_token: token, code: await u.device.next() }).expect(200);
      const reuse = await api.verify({ mfa_challenge_token: token, code: await u.device.next() }).expect(401);
      expect(reuse.body.code).toBe('mfa/invalid_challenge');
    });

    it('the challenge token is short-lived (5 minutes): an expired one is refused with a correct code', async () => {
      const u = await api.enrolledUser();
      const token = await api.challenge(u.email);
      await t.db.query(`UPDATE mfa_challenges SET expires_at = now() - interval '1 second', created_at = now() - interval '301 seconds' WHERE user_id = $1`, [u.userId]);
      const res = await api.verify({ mfa_challenge_token: token, code: await u.device.next() }).expect(401);
      expect(res.body.code).toBe('mfa/invalid_challenge');
    });

    it("another tenant's API key cannot use the challenge (same 401 as an unknown token); the owner tenant still can", async () => {
      const u = await api.enrolledUser();
      const token = await api.challenge(u.email);
      const code = await u.device.next();
      const foreign = await api.verify({ mfa_challenge_token: token, code }, other.apiKey).expect(401);
      const unknown = await api.verify({ mfa_challenge_token: 'x'.repeat(43), code }).expect(401);
      expect(foreign.body.code).toBe('mfa/invalid_challenge');
      expect({ ...foreign.body, request_id: 0 }).toEqual({ ...unknown.body, request_id: 0 });
      await api.verify({ mfa_challenge_token: token, code }).expect(200);
    });

    it('failed codes count in the kernel throttle: 5 failures of one user from one address, then 429 auth/login_throttled', async () => {
      const u = await api.enrolledUser();
      const ip = randomIp();
      const first = await api.challenge(u.email);
      for (let i = 0; i < 3; i++) await api.verify({ mfa_challenge_token: first, code: wrongCode(u) }, tenant.apiKey, ip).expect(401);
      const second = await api.challenge(u.email);
      for (let i = 0; i < 2; i++) await api.verify({ mfa_challenge_token: second, code: wrongCode(u) }, tenant.apiKey, ip).expect(401);
      const res = await api.verify({ mfa_challenge_token: second, code: await u.device.next() }, tenant.apiKey, ip).expect(429);
      expect(res.body.code).toBe('auth/login_throttled');
      expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
      expect(res.headers['x-service-docs']).toMatch(/^http/);
      // the throttled attempt was not evaluated; another address still signs in
      await api.verify({ mfa_challenge_token: second, code: codeAt(u.device.secret, u.device.lastStep) }, tenant.apiKey, randomIp()).expect(200);
    });

    it('wrong codes from many addresses: past MFA_FAILURES_PER_ACCOUNT (10, not the password\'s 50) the account answers 429 to new addresses; one that passed MFA before still signs in', async () => {
      const u = await api.enrolledUser();
      const home = randomIp();
      const first = await api.challenge(u.email);
      await api.verify({ mfa_challenge_token: first, code: await u.device.next() }, tenant.apiKey, home).expect(200);
      for (let i = 0; i < 2; i++) {
        const token = await api.challenge(u.email);
        for (let j = 0; j < 5; j++) await api.verify({ mfa_challenge_token: token, code: wrongCode(u) }, tenant.apiKey, randomIp()).expect(401);
      }
      const token = await api.challenge(u.email);
      const res = await api.verify({ mfa_challenge_token: token, code: wrongCode(u) }, tenant.apiKey, randomIp()).expect(429);
      expect(res.body.code).toBe('auth/login_throttled');
      expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
      await api.verify({ mfa_challenge_token: token, code: await u.device.next() }, tenant.apiKey, home).expect(200);
    });

    it('a wrong code after the right password mails the user once per window (the password is known to whoever it was), with the audit row', async () => {
      const u = await api.enrolledUser();
      const notices = () =>
        t.db.query<{ first_factor: string }>(
          `SELECT payload->'data'->>'first_factor' AS first_factor FROM outbox WHERE topic = 'email' AND payload->>'template' = 'mfa_sign_in_failed' AND payload->>'to' = $1`,
          [u.email],
        );
      const token = await api.challenge(u.email);
      await api.verify({ mfa_challenge_token: token, code: wrongCode(u) }).expect(401);
      expect(await notices()).toEqual([{ first_factor: 'password' }]);
      await api.verify({ mfa_challenge_token: token, code: wrongCode(u) }).expect(401);
      await api.verify({ mfa_challenge_token: await api.challenge(u.email), code: wrongCode(u) }).expect(401);
      expect(await notices()).toHaveLength(1);
      const audits = await t.db.query(`SELECT 1 FROM audit_events WHERE type = 'user.mfa_failed' AND target_id = $1`, [u.userId]);
      expect(audits).toHaveLength(3);
    });

    it('no such mail for a wrong code from an address that passed MFA for the user before (the owner mistyping); one from a new address is told', async () => {
      const u = await api.enrolledUser();
      const home = randomIp();
      await api.verify({ mfa_challenge_token: await api.challenge(u.email), code: await u.device.next() }, tenant.apiKey, home).expect(200);
      const notices = () => t.db.query(`SELECT 1 FROM outbox WHERE topic = 'email' AND payload->>'template' = 'mfa_sign_in_failed' AND payload->>'to' = $1`, [u.email]);
      await api.verify({ mfa_challenge_token: await api.challenge(u.email), code: wrongCode(u) }, tenant.apiKey, home).expect(401);
      expect(await notices()).toHaveLength(0);
      await api.verify({ mfa_challenge_token: await api.challenge(u.email), code: wrongCode(u) }, tenant.apiKey, randomIp()).expect(401);
      expect(await notices()).toHaveLength(1);
    });

    it.each([
      ['mfa_challenge_token missing', { code: '123456' }, 'mfa_challenge_token'],
      ['mfa_challenge_token empty', { mfa_challenge_token: '', code: '123456' }, 'mfa_challenge_token'],
      ['mfa_challenge_token not a string', { mfa_challenge_token: 42, code: '123456' }, 'mfa_challenge_token'],
      ['code missing', { mfa_challenge_token: 'abc' }, 'code'],
      ['code empty', { mfa_challenge_token: 'abc', code: '' }, 'code'],
      ['code not a string', { mfa_challenge_token: 'abc', code: 123456 }, 'code'],
      ['an extra property', { mfa_challenge_token: 'abc', code: '123456', trust_device: true }, 'trust_device'],
    ])('verify rejects %s with 400 request/invalid (MfaVerifyLoginRequest)', async (_n, body, field) => {
      const res = await api.verify(body).expect(400);
      expect(res.body.code).toBe('request/invalid');
      expect(res.body.errors.map((e: { field: string }) => e.field)).toContain(field);
    });

    it('verify needs the tenant API key (401 auth/invalid_api_key)', async () => {
      const res = await t.http().post('/v1/auth/mfa/verify').send({ mfa_challenge_token: 'abc', code: '123456' }).expect(401);
      expect(res.body.code).toBe('auth/invalid_api_key');
    });
  });

  describe('disable and recovery-code regeneration', () => {
    it('disable needs a fresh step-up (403 auth/step_up_required), the password and a valid code; then login answers tokens again', async () => {
      const u = await api.enrolledUser();
      const session = await api.signIn(u);
      const noStepUp = await api.disable(session.access_token, { code: '123456', password: STRONG_PASSWORD }).expect(403);
      expect(noStepUp.body.code).toBe('auth/step_up_required');
      const stepped = await api.steppedUp(session.access_token);
      const badPassword = await api.disable(stepped, { code: await u.device.next(), password: 'not the password' }).expect(401);
      expect(badPassword.body.code).toBe('auth/invalid_credentials');
      const badCode = await api.disable(stepped, { code: wrongCode(u), password: STRONG_PASSWORD }).expect(401);
      expect(badCode.body.code).toBe('mfa/invalid_code');
      expect((await api.disable(stepped, { code: 'abcde-fghij', password: STRONG_PASSWORD }).expect(401)).body.code).toBe('mfa/invalid_code');
      // the code refused with the wrong password was not consumed
      await api.disable(stepped, { code: codeAt(u.device.secret, u.device.lastStep), password: STRONG_PASSWORD }).expect(204);
      expect(await t.db.query(`SELECT 1 FROM user_mfa_factors WHERE user_id = $1`, [u.userId])).toHaveLength(0);
      expect(await t.db.query(`SELECT 1 FROM mfa_recovery_codes WHERE user_id = $1`, [u.userId])).toHaveLength(0);
      const login = await api.login(u.email).expect(200);
      expect(login.body.access_token).toEqual(expect.any(String));
      expect((await api.disable(stepped, { code: '123456', password: STRONG_PASSWORD }).expect(409)).body.code).toBe('mfa/not_enabled');
      // told when it was turned on and when off; the refused attempts told nothing
      expect(await mfaNotices(u.userId)).toEqual(['enabled', 'disabled']);
      const [audit] = await t.db.query<{ severity: string }>(`SELECT severity FROM audit_events WHERE type = 'user.mfa_disabled' AND target_id = $1`, [u.userId]);
      expect(audit.severity).toBe('high');
    });

    it('disables and a regeneration racing for one user: one wins, the others get a clean 401/409, never a deadlock (500)', async () => {
      for (let round = 0; round < 3; round++) {
        const u = await api.enrolledUser();
        const stepped = await api.steppedUp(u.accessToken);
        const body = (code: string) => ({ code, password: STRONG_PASSWORD });
        // a TOTP-confirmed regeneration and disables confirmed with three different recovery codes
        const answers = await Promise.all([
          api.regenerate(stepped, body(await u.device.next())),
          ...u.recoveryCodes.slice(0, 3).map((c) => api.disable(stepped, body(c))),
        ]);
        const statuses = answers.map((r) => r.status);
        expect(statuses.filter((s) => s >= 500)).toEqual([]);
        expect(statuses.filter((s) => s === 200 || s === 204)).toHaveLength(1);
        for (const r of answers.filter((a) => a.status >= 400)) expect(['mfa/invalid_code', 'mfa/not_enabled']).toContain(r.body.code);
        const audit = await t.db.query<{ type: string }>(`SELECT type FROM audit_events WHERE target_id = $1 AND type IN ('user.mfa_disabled', 'user.mfa_recovery_codes_regenerated')`, [u.userId]);
        expect(audit).toHaveLength(1);
      }
    });

    it('disable accepts a recovery code (lost authenticator)', async () => {
      const u = await api.enrolledUser();
      const session = await api.signIn(u);
      const stepped = await api.steppedUp(session.access_token);
      await api.disable(stepped, { code: u.recoveryCodes[3], password: STRONG_PASSWORD }).expect(204);
    });

    it('a step-up token older than 5 minutes does not allow disable', async () => {
      const u = await api.enrolledUser();
      const session = await api.signIn(u);
      const claims = claimsOf(session.access_token);
      const { iss: _i, aud: _a, exp: _e, iat: _t, jti: _j, ...rest } = claims;
      const input = { ...rest, step_up_at: Math.floor(Date.now() / 1000) - 301 } as unknown as Parameters<JwtService['sign']>[0];
      const { token } = await t.app.get(JwtService).sign(input);
      const res = await api.disable(token, { code: '123456', password: STRONG_PASSWORD }).expect(403);
      expect(res.body.code).toBe('auth/step_up_required');
    });

    it.each([
      ['code missing', { password: STRONG_PASSWORD }, 'code'],
      ['code empty', { code: '', password: STRONG_PASSWORD }, 'code'],
      ['code not a string', { code: 123456, password: STRONG_PASSWORD }, 'code'],
      ['password missing', { code: '123456' }, 'password'],
      ['password empty', { code: '123456', password: '' }, 'password'],
      ['an extra property', { code: '123456', password: STRONG_PASSWORD, force: true }, 'force'],
    ])('disable rejects %s with 400 request/invalid (MfaDisableRequest)', async (_n, body, field) => {
      const u = await api.register();
      const stepped = await api.steppedUp(u.accessToken);
      const res = await api.disable(stepped, body).expect(400);
      expect(res.body.code).toBe('request/invalid');
      expect(res.body.errors.map((e: { field: string }) => e.field)).toContain(field);
    });

    it('regenerate needs the password and a TOTP code; the old recovery codes stop working, the new ones work', async () => {
      const u = await api.enrolledUser();
      const session = await api.signIn(u);
      const wrongPassword = await api.regenerate(session.access_token, { code: await u.device.next(), password: 'not the password' }).expect(401);
      expect(wrongPassword.body.code).toBe('auth/invalid_credentials');
      expect((await api.regenerate(session.access_token, { code: wrongCode(u), password: STRONG_PASSWORD }).expect(401)).body.code).toBe('mfa/invalid_code');
      const res = await api.regenerate(session.access_token, { code: codeAt(u.device.secret, u.device.lastStep), password: STRONG_PASSWORD }).expect(200);
      expect(Object.keys(res.body)).toEqual(['recovery_codes']);
      expect(res.body.recovery_codes).toHaveLength(10);
      expect(res.body.recovery_codes).not.toContain(u.recoveryCodes[0]);
      await api.verify({ mfa_challenge_token: await api.challenge(u.email), code: u.recoveryCodes[0] }).expect(401);
      await api.verify({ mfa_challenge_token: await api.challenge(u.email), code: res.body.recovery_codes[0] }).expect(200);
      // the code that regenerated was used in its step
      const replay = await api.regenerate(session.access_token, { code: codeAt(u.device.secret, u.device.lastStep), password: STRONG_PASSWORD }).expect(401);
      expect(replay.body.code).toBe('mfa/invalid_code');
      expect(await mfaNotices(u.userId)).toEqual(['enabled', 'recovery_codes_regenerated']);
    });

    it('a wrong password counts with password login of the account (no guessing beside a throttled sign-in); a wrong code with MFA sign-in', async () => {
      const u = await api.enrolledUser();
      const session = await api.signIn(u);
      const stepped = await api.steppedUp(session.access_token);
      const ip = randomIp();
      // sign-in from this address used up its failures for the account
      for (let i = 0; i < 5; i++) await api.login(u.email, 'not the password', tenant.apiKey, ip).expect(401);
      for (const send of [api.regenerate, api.disable]) {
        const res = await send(stepped, { code: '123456', password: 'not the password either' }, ip).expect(429);
        expect(res.body.code).toBe('auth/login_throttled');
        expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
      }
      // and the other way round: wrong passwords here throttle password sign-in of the account from there
      const other = randomIp();
      for (let i = 0; i < 5; i++) expect((await api.regenerate(session.access_token, { code: '123456', password: 'not the password' }, other).expect(401)).body.code).toBe('auth/invalid_credentials');
      expect((await api.login(u.email, STRONG_PASSWORD, tenant.apiKey, other).expect(429)).body.code).toBe('auth/login_throttled');
      // wrong codes with the right password count with MFA sign-in from that address
      const third = randomIp();
      for (let i = 0; i < 5; i++) expect((await api.regenerate(session.access_token, { code: wrongCode(u), password: STRONG_PASSWORD }, third).expect(401)).body.code).toBe('mfa/invalid_code');
      expect((await api.verify({ mfa_challenge_token: await api.challenge(u.email), code: wrongCode(u) }, tenant.apiKey, third).expect(429)).body.code).toBe('auth/login_throttled');
    });

    it('regenerate without MFA is 409 mfa/not_enabled', async () => {
      const u = await api.register();
      expect((await api.regenerate(u.accessToken, { code: '123456', password: STRONG_PASSWORD }).expect(409)).body.code).toBe('mfa/not_enabled');
    });

    it.each([
      ['code missing', { password: STRONG_PASSWORD }, 'code'],
      ['code of 5 digits', { code: '12345', password: STRONG_PASSWORD }, 'code'],
      ['code of 7 digits', { code: '1234567', password: STRONG_PASSWORD }, 'code'],
      ['a recovery code', { code: 'abcde-fghij', password: STRONG_PASSWORD }, 'code'],
      ['password missing', { code: '123456' }, 'password'],
      ['password empty', { code: '123456', password: '' }, 'password'],
      ['an extra property', { code: '123456', password: STRONG_PASSWORD, all: true }, 'all'],
    ])('regenerate rejects %s with 400 request/invalid (MfaRegenerateCodesRequest)', async (_n, body, field) => {
      const u = await api.register();
      const res = await api.regenerate(u.accessToken, body).expect(400);
      expect(res.body.code).toBe('request/invalid');
      expect(res.body.errors.map((e: { field: string }) => e.field)).toContain(field);
    });
  });
});

/** A 6-digit code that is none of the user's codes in the server's window. */
function wrongCode(u: { device: TotpDevice }): string {
  const s = currentStep();
  const valid = new Set([s - 2, s - 1, s, s + 1, s + 2].map((x) => codeAt(u.device.secret, x)));
  for (;;) {
    const c = String(Math.floor(Math.random() * 1e6)).padStart(6, '0');
    if (!valid.has(c)) return c;
  }
}

function base32Decode(s: string): number[] {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
  let bits = 0;
  let value = 0;
  const out: number[] = [];
  for (const ch of s) {
    value = (value << 5) | alphabet.indexOf(ch);
    bits += 5;
    if (bits >= 8) {
      out.push((value >>> (bits - 8)) & 255);
      bits -= 8;
    }
    value &= (1 << bits) - 1;
  }
  return out;
}
