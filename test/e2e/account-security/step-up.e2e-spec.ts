import { randomIp } from '../../setup/app';
import {
  ACCOUNTS_URL,
  bearerPost,
  claims,
  linkToken,
  login,
  mailCode,
  MailWorld,
  post,
  register,
  RegisteredUser,
  startMailWorld,
  TenantWithKey,
  tenantWithKey,
} from './account-security.helpers';

describe('account security: step-up by magic link and email code (spec 2.5)', () => {
  let w: MailWorld;
  let tenant: TenantWithKey;
  let other: TenantWithKey;

  beforeAll(async () => {
    w = await startMailWorld();
    tenant = await tenantWithKey(w.t, { magic_link_enabled: true, email_otp_enabled: true });
    other = await tenantWithKey(w.t);
  }, 60_000);
  afterAll(() => w?.close());

  const linkMail = (to: string) => w.nextMail((m) => m.to.includes(to) && m.subject.startsWith('Confirm it is you'));
  const codeMail = (to: string) => w.nextMail((m) => m.to.includes(to) && m.subject.endsWith('confirmation code'));
  const stepUpLink = async (u: { email: string }, access: string, body: object = {}) => {
    const r = await bearerPost(w.t, '/v1/auth/step-up/magic-link', access, body).expect(202);
    expect(r.body).toEqual({ status: 'accepted', expires_in: 900 });
    return linkToken(await linkMail(u.email), '/step-up/magic-link');
  };
  const stepUpCode = async (u: { email: string }, access: string) => {
    const r = await bearerPost(w.t, '/v1/auth/step-up/email-otp', access, {}).expect(202);
    expect(r.body).toEqual({ status: 'accepted', expires_in: 600 });
    return mailCode(await codeMail(u.email));
  };
  const wrong = (code: string) => String((Number(code) + 1) % 1_000_000).padStart(6, '0');

  const expectStepUp = (body: Record<string, unknown>, u: RegisteredUser, before: string, method: string) => {
    expect(Object.keys(body).sort()).toEqual(['access_token', 'expires_in', 'token_type']);
    expect(body).toMatchObject({ expires_in: 900, token_type: 'Bearer' });
    const c = claims(body.access_token as string);
    const b = claims(before);
    expect(c.sub).toBe(u.id);
    expect(c.sid).toBe(b.sid);
    expect(c.aal).toBe(b.aal);
    expect(c.amr).toEqual(expect.arrayContaining(['pwd', method]));
    expect(Number.isInteger(c.step_up_at)).toBe(true);
    expect(Math.abs((c.step_up_at as number) - Date.now() / 1000)).toBeLessThan(30);
    expect(c.step_up_at).toBeLessThanOrEqual(c.iat as number);
  };

  it('a method the tenant has switched off is off for step-up too: 403 magic_link/disabled, email_otp/disabled, nothing mailed', async () => {
    const u = await register(w.t, other.apiKey);
    expect((await bearerPost(w.t, '/v1/auth/step-up/magic-link', u.access, {}).expect(403)).body.code).toBe('magic_link/disabled');
    expect((await bearerPost(w.t, '/v1/auth/step-up/email-otp', u.access, {}).expect(403)).body.code).toBe('email_otp/disabled');
    expect((await bearerPost(w.t, '/v1/auth/step-up/email-otp/verify', u.access, { otp: '123456' }).expect(403)).body.code).toBe('email_otp/disabled');
    const mails = await w.t.db.query(`SELECT 1 FROM outbox WHERE topic = 'email' AND lower(payload->>'to') = lower($1) AND event_type IN ('email.magic_link', 'email.email_otp')`, [u.email]);
    expect(mails).toHaveLength(0);
  });

  describe('magic link', () => {
    it('mails a link for this session (tenant name, action hint); verify answers a fresh access token with amr + "email" and step_up_at', async () => {
      const u = await register(w.t, tenant.apiKey);
      await w.t.db.query('UPDATE users SET email_verified = true WHERE id = $1', [u.id]);
      const r = await bearerPost(w.t, '/v1/auth/step-up/magic-link', u.access, { action_hint: 'change your email address' }).expect(202);
      expect(r.body).toEqual({ status: 'accepted', expires_in: 900 });
      const mail = await linkMail(u.email);
      expect(mail.subject).toBe(`Confirm it is you on ${tenant.name}`);
      expect(mail.text).toContain('change your email address');
      expect(mail.html).toContain(tenant.name);
      expect(mail.text).toContain(`${ACCOUNTS_URL}/step-up/magic-link?token=`);
      const token = linkToken(mail, '/step-up/magic-link');
      const res = await bearerPost(w.t, '/v1/auth/step-up/magic-link/verify', u.access, { token }).expect(200);
      expectStepUp(res.body, u, u.access, 'email');
      // the new token works like any access token of the session
      await w.t.http().get('/v1/auth/me').set('Authorization', `Bearer ${res.body.access_token}`).expect(200);
    });

    it('mails the action hint only to a verified address: an unverified one may not be the registrant\'s, so it gets the link without their text', async () => {
      const u = await register(w.t, tenant.apiKey);
      await bearerPost(w.t, '/v1/auth/step-up/magic-link', u.access, { action_hint: 'LOCKED: unlock at https://evil.example' }).expect(202);
      const link = await linkMail(u.email);
      expect(link.text).toContain(`${ACCOUNTS_URL}/step-up/magic-link?token=`);
      expect(`${link.text}${link.html}`).not.toContain('evil.example');
      await bearerPost(w.t, '/v1/auth/step-up/email-otp', u.access, { action_hint: 'LOCKED: unlock at https://evil.example' }).expect(202);
      const code = await codeMail(u.email);
      expect(`${code.text}${code.html}`).not.toContain('evil.example');
    });

    it('works once', async () => {
      const u = await register(w.t, tenant.apiKey);
      const token = await stepUpLink(u, u.access);
      const results = await Promise.all(Array.from({ length: 4 }, () => bearerPost(w.t, '/v1/auth/step-up/magic-link/verify', u.access, { token })));
      expect(results.map((r) => r.status).sort()).toEqual([200, 400, 400, 400]);
      expect((await bearerPost(w.t, '/v1/auth/step-up/magic-link/verify', u.access, { token }).expect(400)).body.code).toBe('token/invalid');
    });

    it('is bound to the session that asked: another session of the same user, or another user, cannot use it (and does not burn it)', async () => {
      const u = await register(w.t, tenant.apiKey);
      const otherSession = await login(w.t, tenant.apiKey, u.email);
      const stranger = await register(w.t, tenant.apiKey);
      const token = await stepUpLink(u, u.access);
      expect((await bearerPost(w.t, '/v1/auth/step-up/magic-link/verify', otherSession.access, { token }).expect(400)).body.code).toBe('token/invalid');
      expect((await bearerPost(w.t, '/v1/auth/step-up/magic-link/verify', stranger.access, { token }).expect(400)).body.code).toBe('token/invalid');
      await bearerPost(w.t, '/v1/auth/step-up/magic-link/verify', u.access, { token }).expect(200);
    });

    it('a sign-in magic link is not a step-up link, nor the reverse', async () => {
      const u = await register(w.t, tenant.apiKey);
      await post(w.t, '/v1/auth/magic-link', tenant.apiKey, { email: u.email }).expect(202);
      const signIn = linkToken(await w.nextMail((m) => m.to.includes(u.email) && m.subject.startsWith('Your sign-in link')), '/magic-link');
      const stepUp = await stepUpLink(u, u.access);
      expect((await bearerPost(w.t, '/v1/auth/step-up/magic-link/verify', u.access, { token: signIn }).expect(400)).body.code).toBe('token/invalid');
      expect((await post(w.t, '/v1/auth/magic-link/verify', tenant.apiKey, { token: stepUp }).expect(400)).body.code).toBe('token/invalid');
      expect((await post(w.t, '/v1/auth/password/reset', tenant.apiKey, { token: stepUp, password: 'some new password' }).expect(400)).body.code).toBe('token/invalid');
    });

    it('a newer link replaces the older one of the session', async () => {
      const u = await register(w.t, tenant.apiKey);
      const first = await stepUpLink(u, u.access);
      const second = await stepUpLink(u, u.access);
      await bearerPost(w.t, '/v1/auth/step-up/magic-link/verify', u.access, { token: first }).expect(400);
      await bearerPost(w.t, '/v1/auth/step-up/magic-link/verify', u.access, { token: second }).expect(200);
    });

    it.each([
      ['action_hint of 81 characters', '/v1/auth/step-up/magic-link', { action_hint: 'h'.repeat(81) }, 'action_hint'],
      ['action_hint not a string', '/v1/auth/step-up/magic-link', { action_hint: 3 }, 'action_hint'],
      ['action_hint with a bidirectional override', '/v1/auth/step-up/magic-link', { action_hint: 'confirm \u202edrawkcab' }, 'action_hint'],
      ['action_hint with an escape character', '/v1/auth/step-up/magic-link', { action_hint: 'x\u001b[2J' }, 'action_hint'],
      ['an unknown property', '/v1/auth/step-up/magic-link', { email: 'x@example.com' }, 'email'],
      ['token missing', '/v1/auth/step-up/magic-link/verify', {}, 'token'],
      ['token empty', '/v1/auth/step-up/magic-link/verify', { token: '' }, 'token'],
      ['token of 257 characters', '/v1/auth/step-up/magic-link/verify', { token: 't'.repeat(257) }, 'token'],
    ])('rejects %s with 400 request/invalid', async (_n, path, body, field) => {
      const u = await register(w.t, tenant.apiKey);
      const r = await bearerPost(w.t, path, u.access, body).expect(400);
      expect(r.body.code).toBe('request/invalid');
      expect(r.body.errors.map((e: { field: string }) => e.field)).toContain(field);
    });

    it('an action_hint of exactly 80 characters is accepted', async () => {
      const u = await register(w.t, tenant.apiKey);
      await stepUpLink(u, u.access, { action_hint: 'h'.repeat(80) });
    });
  });

  describe('email code', () => {
    it('mails a code for this session; verify answers a fresh access token with amr + "otp" and step_up_at', async () => {
      const u = await register(w.t, tenant.apiKey);
      const code = await stepUpCode(u, u.access);
      const res = await bearerPost(w.t, '/v1/auth/step-up/email-otp/verify', u.access, { otp: code }).expect(200);
      expectStepUp(res.body, u, u.access, 'otp');
      await bearerPost(w.t, '/v1/auth/step-up/email-otp/verify', u.access, { otp: code }).expect(401);
    });

    it('at most 5 evaluations per code, counted atomically (20 parallel wrong guesses), then it is dead', async () => {
      const u = await register(w.t, tenant.apiKey);
      const code = await stepUpCode(u, u.access);
      const results = await Promise.all(Array.from({ length: 20 }, (_, i) => bearerPost(w.t, '/v1/auth/step-up/email-otp/verify', u.access, { otp: String((Number(code) + 1 + i) % 1_000_000).padStart(6, '0') })));
      // 10 pass the account's cap of wrong codes (the rest: 429), 5 of them reach the code
      expect(results.filter((r) => r.status === 401 && r.body.code === 'otp/invalid')).toHaveLength(10);
      expect(results.filter((r) => r.status === 429 && r.body.code === 'auth/login_throttled')).toHaveLength(10);
      const [row] = await w.t.db.query<{ attempts: number }>(`SELECT attempts FROM email_otp_codes WHERE user_id = $1 AND purpose = 'step_up'`, [u.id]);
      expect(row.attempts).toBe(5);
      await bearerPost(w.t, '/v1/auth/step-up/email-otp/verify', u.access, { otp: code }).expect(429);
    });

    it('is bound to the session: another session of the same user cannot use it', async () => {
      const u = await register(w.t, tenant.apiKey);
      const second = await login(w.t, tenant.apiKey, u.email);
      const code = await stepUpCode(u, u.access);
      await bearerPost(w.t, '/v1/auth/step-up/email-otp/verify', second.access, { otp: code }).expect(401);
      await bearerPost(w.t, '/v1/auth/step-up/email-otp/verify', u.access, { otp: code }).expect(200);
    });

    it('a sign-in code is not a step-up code', async () => {
      const u = await register(w.t, tenant.apiKey);
      await post(w.t, '/v1/auth/email-otp', tenant.apiKey, { email: u.email }).expect(202);
      const signIn = mailCode(await w.nextMail((m) => m.to.includes(u.email) && m.subject.endsWith('verification code')));
      await stepUpCode(u, u.access);
      await bearerPost(w.t, '/v1/auth/step-up/email-otp/verify', u.access, { otp: signIn }).expect(401);
    });

    it.each([
      ['otp missing', {}],
      ['otp empty', { otp: '' }],
      ['otp of 9 characters', { otp: '123456789' }],
      ['otp not a string', { otp: 123456 }],
      ['an unknown property', { otp: '123456', code: '123456' }],
    ])('verify rejects %s with 400 request/invalid', async (_n, body) => {
      const u = await register(w.t, tenant.apiKey);
      expect((await bearerPost(w.t, '/v1/auth/step-up/email-otp/verify', u.access, body).expect(400)).body.code).toBe('request/invalid');
    });

    it('an otp of up to 8 characters is evaluated (and counted) like any wrong code', async () => {
      const u = await register(w.t, tenant.apiKey);
      const code = await stepUpCode(u, u.access);
      await bearerPost(w.t, '/v1/auth/step-up/email-otp/verify', u.access, { otp: '12345678' }).expect(401);
      await bearerPost(w.t, '/v1/auth/step-up/email-otp/verify', u.access, { otp: wrong(code) }).expect(401);
      const [row] = await w.t.db.query<{ attempts: number }>(`SELECT attempts FROM email_otp_codes WHERE user_id = $1 AND purpose = 'step_up'`, [u.id]);
      expect(row.attempts).toBe(2);
    });
  });

  it('needs a bearer; guests cannot step up by email; an ended session cannot step up', async () => {
    for (const path of ['/v1/auth/step-up/magic-link', '/v1/auth/step-up/email-otp', '/v1/auth/step-up/magic-link/verify', '/v1/auth/step-up/email-otp/verify']) {
      await post(w.t, path, tenant.apiKey, {}).expect(401);
    }
    await w.t.db.query(`UPDATE tenants SET anonymous_signins_enabled = true, anonymous_ever_enabled = true, default_user_role = 'read_only' WHERE id = $1`, [tenant.tenantId]);
    await w.t.tenantChanged(tenant.tenantId);
    const guest = await post(w.t, '/v1/auth/anonymous', tenant.apiKey, {}).expect(201);
    expect((await bearerPost(w.t, '/v1/auth/step-up/magic-link', guest.body.access_token, {}).expect(403)).body.code).toBe('auth/forbidden');
    expect((await bearerPost(w.t, '/v1/auth/step-up/email-otp', guest.body.access_token, {}).expect(403)).body.code).toBe('auth/forbidden');

    const u = await register(w.t, tenant.apiKey);
    await bearerPost(w.t, '/v1/auth/logout', u.access, {}).expect(204);
    await bearerPost(w.t, '/v1/auth/step-up/magic-link', u.access, {}).expect(401);
  });

  it('an X-API-Key of another tenant beside the bearer is refused', async () => {
    const u = await register(w.t, tenant.apiKey);
    await w.t.http().post('/v1/auth/step-up/email-otp').set('Authorization', `Bearer ${u.access}`).set('X-API-Key', other.apiKey).send({}).expect(401);
  });

  it('initiations are limited per account and per client address (429 + Retry-After)', async () => {
    const low = await w.extraApp({ RATE_LIMIT_EMAIL_PER_ADDRESS: '2' });
    const u = await register(w.t, tenant.apiKey);
    await bearerPost(low, '/v1/auth/step-up/email-otp', u.access, {}, randomIp()).expect(202);
    await bearerPost(low, '/v1/auth/step-up/email-otp', u.access, {}, randomIp()).expect(202);
    const r = await bearerPost(low, '/v1/auth/step-up/email-otp', u.access, {}, randomIp()).expect(429);
    expect(Number(r.headers['retry-after'])).toBeGreaterThan(0);
  });

  it('the step-up token satisfies @RequireStepUp routes (MFA disable answers past the step-up check)', async () => {
    const u = await register(w.t, tenant.apiKey);
    const body = { code: '123456', password: u.password };
    const without = await bearerPost(w.t, '/v1/auth/mfa/disable', u.access, body).expect(403);
    expect(without.body.code).toBe('auth/step_up_required');
    const code = await stepUpCode(u, u.access);
    const stepped = await bearerPost(w.t, '/v1/auth/step-up/email-otp/verify', u.access, { otp: code }).expect(200);
    const withIt = await bearerPost(w.t, '/v1/auth/mfa/disable', stepped.body.access_token, body);
    expect(withIt.body.code).not.toBe('auth/step_up_required');
    expect(withIt.status).not.toBe(401);
  });

  it('RFC 9470 section 3: a missing step-up (403 auth/step_up_required) carries Bearer error="insufficient_user_authentication" with the max_age the route requires; a guest refused a step-up carries RFC 6750 insufficient_scope', async () => {
    const u = await register(w.t, tenant.apiKey);
    const refused = await bearerPost(w.t, '/v1/auth/mfa/disable', u.access, { code: '123456', password: u.password }).expect(403);
    expect(refused.body.code).toBe('auth/step_up_required');
    expect(refused.body.detail).toMatch(/within the last 300 seconds/);
    expect(refused.headers['www-authenticate']).toBe(`Bearer error="insufficient_user_authentication", error_description="${refused.body.detail}", max_age=300`);

    await w.t.db.query(`UPDATE tenants SET anonymous_signins_enabled = true, anonymous_ever_enabled = true, default_user_role = 'read_only' WHERE id = $1`, [tenant.tenantId]);
    await w.t.tenantChanged(tenant.tenantId);
    const guest = await post(w.t, '/v1/auth/anonymous', tenant.apiKey, {}).expect(201);
    for (const path of ['/v1/auth/step-up/magic-link', '/v1/auth/step-up/email-otp', '/v1/auth/step-up/password']) {
      const res = await bearerPost(w.t, path, guest.body.access_token, path.endsWith('password') ? { password: 'x' } : {}).expect(403);
      expect([path, res.body.code, res.headers['www-authenticate']]).toEqual([path, 'auth/forbidden', expect.stringMatching(/^Bearer error="insufficient_scope", error_description="[^"]+"$/)]);
    }
  });
});
