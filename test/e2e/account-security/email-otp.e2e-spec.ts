import { createServer, Server } from 'http';
import { AddressInfo } from 'net';
import { authenticator } from 'otplib';
import { EmailCodes } from '../../../src/modules/account-security/email-codes.service';
import { randomIp, STRONG_PASSWORD, uniqueEmail } from '../../setup/app';
import {
  bearerPost,
  claims,
  linkToken,
  mailCode,
  MailWorld,
  outboxTo,
  patchSecurity,
  post,
  register,
  startMailWorld,
  TenantWithKey,
  tenantWithKey,
} from './account-security.helpers';

describe('account security: email code sign-in (issue 5 item 4)', () => {
  let w: MailWorld;
  let tenant: TenantWithKey;
  let other: TenantWithKey;

  beforeAll(async () => {
    w = await startMailWorld();
    tenant = await tenantWithKey(w.t, { email_otp_enabled: true });
    other = await tenantWithKey(w.t, { email_otp_enabled: true });
  }, 60_000);
  afterAll(() => w?.close());

  const request = (body: unknown, key = tenant.apiKey, ip = randomIp()) => post(w.t, '/v1/auth/email-otp', key, body, ip);
  const verify = (body: unknown, key = tenant.apiKey, ip = randomIp()) => post(w.t, '/v1/auth/email-otp/verify', key, body, ip);
  const codeMail = (to: string) => w.nextMail((m) => m.to.includes(to.toLowerCase()) && m.subject.endsWith('verification code'));
  const requestCode = async (email: string, extra: object = {}, key = tenant.apiKey) => {
    await request({ email, ...extra }, key).expect(202);
    return mailCode(await codeMail(email));
  };
  const wrong = (code: string) => String((Number(code) + 1) % 1_000_000).padStart(6, '0');
  const codeRow = async (email: string, tenantId = tenant.tenantId) =>
    (await w.t.db.query<{ attempts: number; code_hash: string; salt: string; consumed_at: Date | null; ttl: number }>(
      `SELECT attempts, code_hash, salt, consumed_at, extract(epoch FROM expires_at - created_at)::int AS ttl
         FROM email_otp_codes WHERE tenant_id = $1 AND email_normalized = $2 AND purpose = 'login'`,
      [tenantId, email.toLowerCase()],
    ))[0];

  it('is off until the tenant enables it: 403 email_otp/disabled', async () => {
    const off = await tenantWithKey(w.t);
    expect((await request({ email: uniqueEmail() }, off.apiKey).expect(403)).body.code).toBe('email_otp/disabled');
    expect((await verify({ email: uniqueEmail(), code: '123456' }, off.apiKey).expect(403)).body.code).toBe('email_otp/disabled');
  });

  it('mails a 6-digit code (text and HTML, tenant name, 10 minutes, stored as an HMAC); verify signs in with amr ["otp"] and verifies the address', async () => {
    const u = await register(w.t, tenant.apiKey);
    const res = await request({ email: u.email }).expect(202);
    expect(res.body).toEqual({ status: 'accepted', message: expect.any(String) });
    const mail = await codeMail(u.email);
    expect(mail.subject).toBe(`Your ${tenant.name} verification code`);
    expect(mail.text).toContain('10 minutes');
    expect(mail.html).toContain(tenant.name);
    expect(mail.text).not.toContain('token=');
    const code = mailCode(mail);
    const row = await codeRow(u.email);
    expect(row.ttl).toBe(600);
    expect(row.code_hash).toMatch(/^[0-9a-f]{64}$/);
    expect(row.code_hash).not.toContain(code);
    expect(row.salt).not.toContain(code);
    const [ob] = (await outboxTo(w.t, u.email)).filter((o) => o.event_type === 'email.email_otp');
    expect(ob.payload).not.toContain(code);

    const signed = await verify({ email: u.email.toUpperCase(), code }).expect(200);
    expect(signed.body.user).toEqual({ id: u.id, email: u.email, email_verified: true, is_anonymous: false, created_at: expect.any(String) });
    expect(claims(signed.body.access_token)).toMatchObject({ sub: u.id, amr: ['otp'], aal: 'AAL1', email_verified: true });
    expect(signed.body.refresh_token).toEqual(expect.any(String));
  });

  it('pre-account-takeover: the first code sign-in into an account nobody verified ends its sessions and clears its password', async () => {
    // someone registers the owner's address with their own password, and keeps the tokens
    const squatter = await register(w.t, tenant.apiKey);
    const code = await requestCode(squatter.email);
    const owner = await verify({ email: squatter.email, code }).expect(200);
    expect(claims(owner.body.access_token)).toMatchObject({ sub: squatter.id, email_verified: true });
    // the squatter keeps no way in: sessions ended (access and refresh), password gone
    await w.t.http().get('/v1/auth/me').set('Authorization', `Bearer ${squatter.access}`).expect(401);
    await post(w.t, '/v1/auth/refresh', tenant.apiKey, { refresh_token: squatter.refresh }).expect(401);
    expect((await post(w.t, '/v1/auth/login', tenant.apiKey, { email: squatter.email, password: squatter.password }).expect(401)).body.code).toBe('auth/invalid_credentials');
    // the owner's session works
    await w.t.http().get('/v1/auth/me').set('Authorization', `Bearer ${owner.body.access_token}`).expect(200);
    const [audit] = await w.t.db.query<{ metadata: Record<string, unknown> }>(`SELECT metadata FROM audit_events WHERE type = 'user.email_verified' AND target_id = $1`, [squatter.id]);
    expect(audit.metadata).toMatchObject({ method: 'email_otp', cleared_unverified: { password: true, sessions: 1 } });
  });

  it('a password the mailbox owner set by reset is kept (and its sessions) by the first code sign-in', async () => {
    const u = await register(w.t, tenant.apiKey);
    await post(w.t, '/v1/auth/password/forgot', tenant.apiKey, { email: u.email }).expect(202);
    const resetMail = await w.nextMail((m) => m.to.includes(u.email) && m.subject.startsWith('Reset your'));
    const token = linkToken(resetMail, '/reset-password');
    const newPassword = 'a brand new passphrase 42';
    await post(w.t, '/v1/auth/password/reset', tenant.apiKey, { token, password: newPassword }).expect(204);
    const session = await post(w.t, '/v1/auth/login', tenant.apiKey, { email: u.email, password: newPassword }).expect(200);
    await verify({ email: u.email, code: await requestCode(u.email) }).expect(200);
    await post(w.t, '/v1/auth/login', tenant.apiKey, { email: u.email, password: newPassword }).expect(200);
    await w.t.http().get('/v1/auth/me').set('Authorization', `Bearer ${session.body.access_token}`).expect(200);
  });

  it('an account whose address was already verified keeps its password and sessions on a code sign-in', async () => {
    const u = await register(w.t, tenant.apiKey);
    await w.t.db.query(`UPDATE users SET email_verified = true WHERE id = $1`, [u.id]);
    await verify({ email: u.email, code: await requestCode(u.email) }).expect(200);
    await w.t.http().get('/v1/auth/me').set('Authorization', `Bearer ${u.access}`).expect(200);
    await post(w.t, '/v1/auth/login', tenant.apiKey, { email: u.email, password: u.password }).expect(200);
  });

  it('mode login for an unknown address: the same 202 body, no mail, and no code can work', async () => {
    const known = await register(w.t, tenant.apiKey);
    const unknown = uniqueEmail('nobody');
    const [a, b] = await Promise.all([request({ email: known.email }), request({ email: unknown, mode: 'login' })]);
    expect([a.status, b.status]).toEqual([202, 202]);
    expect(b.body).toEqual(a.body);
    await codeMail(known.email);
    expect(await outboxTo(w.t, unknown)).toEqual([]);
    expect((await verify({ email: unknown, code: '000000' }).expect(401)).body.code).toBe('otp/invalid');
  });

  it('mode login_or_create creates a verified account on verification; the next code signs in the same account', async () => {
    const email = uniqueEmail('new');
    const code = await requestCode(email, { mode: 'login_or_create' });
    const [n] = await w.t.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM users WHERE email_normalized = $1`, [email]);
    expect(n.n).toBe(0); // nothing is created before the code is proven
    const first = await verify({ email, code }).expect(200);
    expect(first.body.user).toMatchObject({ email, email_verified: true, is_anonymous: false });
    const me = await w.t.http().get('/v1/auth/me').set('Authorization', `Bearer ${first.body.access_token}`).expect(200);
    expect(me.body).toMatchObject({ email, email_verified: true, role: 'member' });
    const again = await verify({ email, code: await requestCode(email) }).expect(200);
    expect(again.body.user.id).toBe(first.body.user.id);
  });

  it('at most 5 attempts per code: after 5 wrong codes the right one is refused too', async () => {
    const u = await register(w.t, tenant.apiKey);
    const code = await requestCode(u.email);
    for (let i = 0; i < 5; i++) expect((await verify({ email: u.email, code: wrong(code) }).expect(401)).body.code).toBe('otp/invalid');
    expect((await verify({ email: u.email, code }).expect(401)).body.code).toBe('otp/invalid');
    expect((await codeRow(u.email)).attempts).toBe(5);
  });

  it('50 parallel wrong guesses: at most 5 are evaluated, then the code is dead (the address cap refuses the rest past 10)', async () => {
    const u = await register(w.t, tenant.apiKey);
    const code = await requestCode(u.email);
    const guesses = Array.from({ length: 50 }, (_, i) => String((Number(code) + 1 + i) % 1_000_000).padStart(6, '0'));
    const results = await Promise.all(guesses.map((g) => verify({ email: u.email, code: g })));
    expect(results.filter((r) => r.status === 401)).toHaveLength(10);
    expect(results.filter((r) => r.status === 429 && r.body.code === 'auth/login_throttled')).toHaveLength(40);
    expect((await codeRow(u.email)).attempts).toBe(5);
    await verify({ email: u.email, code }).expect(429);
  });

  it('parallel right codes: exactly one sign-in; a used code is refused', async () => {
    const u = await register(w.t, tenant.apiKey);
    const code = await requestCode(u.email);
    const results = await Promise.all(Array.from({ length: 5 }, () => verify({ email: u.email, code })));
    expect(results.map((r) => r.status).sort()).toEqual([200, 401, 401, 401, 401]);
    await verify({ email: u.email, code }).expect(401);
  });

  it('one live code per address: a new request replaces the old code (and its attempts)', async () => {
    const u = await register(w.t, tenant.apiKey);
    const first = await requestCode(u.email);
    await verify({ email: u.email, code: wrong(first) }).expect(401);
    let second = await requestCode(u.email);
    while (second === first) second = await requestCode(u.email); // 1 in a million
    const [rows] = await w.t.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM email_otp_codes WHERE email_normalized = $1`, [u.email]);
    expect(rows.n).toBe(1);
    expect((await codeRow(u.email)).attempts).toBe(0);
    await verify({ email: u.email, code: first }).expect(401);
    await verify({ email: u.email, code: second }).expect(200);
  });

  it('a match of the replaced code cannot use the row the new code took over (review: the row is reused, so a request that matched the old code just before the resend could still consume it)', async () => {
    const u = await register(w.t, tenant.apiKey);
    const codes = w.t.app.get(EmailCodes);
    const target = { purpose: 'login', tenantId: tenant.tenantId, emailNormalized: u.email.toLowerCase() } as const;
    const first = await requestCode(u.email);
    const matched = await codes.attempt(target, first, randomIp());
    expect(matched).toBeDefined();
    let second = await requestCode(u.email);
    while (second === first) second = await requestCode(u.email); // 1 in a million
    // the request that matched the first code goes on to use it: refused, the new code stays live
    expect(await w.t.db.tx((tx) => codes.consume(tx, matched!))).toBe(false);
    await verify({ email: u.email, code: second }).expect(200);
  });

  it('an expired code is refused', async () => {
    const u = await register(w.t, tenant.apiKey);
    const code = await requestCode(u.email);
    await w.t.db.query(`UPDATE email_otp_codes SET expires_at = now() - interval '1 second' WHERE email_normalized = $1`, [u.email]);
    await verify({ email: u.email, code }).expect(401);
  });

  it('switching email codes off voids outstanding codes: switched on again, they stay void', async () => {
    const t2 = await tenantWithKey(w.t, { email_otp_enabled: true });
    const u = await register(w.t, t2.apiKey);
    const code = await requestCode(u.email, {}, t2.apiKey);
    await patchSecurity(w.t, t2, { email_otp_enabled: false }).expect(200);
    expect((await verify({ email: u.email, code }, t2.apiKey).expect(403)).body.code).toBe('email_otp/disabled');
    await patchSecurity(w.t, t2, { email_otp_enabled: true }).expect(200);
    await verify({ email: u.email, code }, t2.apiKey).expect(401);
    // a code of another tenant is untouched
    const v = await register(w.t, tenant.apiKey);
    const kept = await requestCode(v.email);
    await patchSecurity(w.t, t2, { email_otp_enabled: false }).expect(200);
    await verify({ email: v.email, code: kept }).expect(200);
  });

  it("switching email codes off voids the MFA challenges codes opened (401 mfa/invalid_challenge), for good; a password's challenge stays", async () => {
    const t2 = await tenantWithKey(w.t, { email_otp_enabled: true });
    const u = await register(w.t, t2.apiKey);
    await w.t.db.query(`UPDATE users SET email_verified = true WHERE id = $1`, [u.id]); // keeps its password (see pre-account-takeover)
    const setup = await bearerPost(w.t, '/v1/auth/mfa/totp/setup', u.access, {}).expect(200);
    const enabled = await bearerPost(w.t, '/v1/auth/mfa/totp/verify-setup', u.access, { code: authenticator.generate(setup.body.secret) }).expect(200);
    const recovery = enabled.body.recovery_codes[0] as string;
    const byCode = await verify({ email: u.email, code: await requestCode(u.email, {}, t2.apiKey) }, t2.apiKey).expect(200);
    expect(byCode.body).toEqual({ mfa_required: true, mfa_challenge_token: expect.any(String) });
    const byPassword = await post(w.t, '/v1/auth/login', t2.apiKey, { email: u.email, password: u.password }).expect(200);
    expect(byPassword.body).toEqual({ mfa_required: true, mfa_challenge_token: expect.any(String) });

    await patchSecurity(w.t, t2, { email_otp_enabled: false }).expect(200);
    await patchSecurity(w.t, t2, { email_otp_enabled: true }).expect(200);
    const mfaVerify = (challenge: string) => post(w.t, '/v1/auth/mfa/verify', t2.apiKey, { mfa_challenge_token: challenge, code: recovery });
    expect((await mfaVerify(byCode.body.mfa_challenge_token).expect(401)).body.code).toBe('mfa/invalid_challenge');
    // the refused challenge spent no code: the password's challenge completes with the same one
    const ok = await mfaVerify(byPassword.body.mfa_challenge_token).expect(200);
    expect(claims(ok.body.access_token)).toMatchObject({ aal: 'AAL2', amr: expect.arrayContaining(['pwd']) });
  });

  it("a code is bound to its tenant: the same address at another tenant's key fails", async () => {
    const email = uniqueEmail('both');
    await register(w.t, tenant.apiKey, email);
    await register(w.t, other.apiKey, email);
    const code = await requestCode(email);
    await verify({ email, code }, other.apiKey).expect(401);
    const ok = await verify({ email, code }).expect(200);
    expect(claims(ok.body.access_token).tenant_id).toBe(tenant.tenantId);
  });

  it('resume_binding: a code requested with one needs the same value at verification', async () => {
    const u = await register(w.t, tenant.apiKey);
    const code = await requestCode(u.email, { resume_binding: 'browser-1' });
    expect((await verify({ email: u.email, code, resume_binding: 'browser-2' }).expect(400)).body.code).toBe('auth/resume_binding_mismatch');
    await verify({ email: u.email, code, resume_binding: 'browser-1' }).expect(200);
  });

  it('oauth_params must name a registered redirect_uri (400, no mail); the verification resumes them', async () => {
    const client = await w.t
      .http()
      .post(`/v1/auth/dashboard/tenants/${tenant.slug}/oauth-clients`)
      .set('Cookie', tenant.cookie)
      .set('X-CSRF-Token', tenant.csrf)
      .send({ name: 'web', client_type: 'public', redirect_uris: ['https://app.example.test/cb'] })
      .expect(201);
    const u = await register(w.t, tenant.apiKey);
    const bad = await request({ email: u.email, oauth_params: { client_id: client.body.client_id, redirect_uri: 'https://evil.example.test/cb' } }).expect(400);
    expect(bad.body.code).toBe('oauth_params/invalid_redirect_uri');
    expect((await outboxTo(w.t, u.email)).filter((o) => o.event_type === 'email.email_otp')).toEqual([]);
    const oauth = { client_id: client.body.client_id, redirect_uri: 'https://app.example.test/cb', state: 'xyz' };
    const code = await requestCode(u.email, { oauth_params: oauth });
    expect((await verify({ email: u.email, code }).expect(200)).body.oauth_params).toEqual(oauth);
  });

  it('a user with TOTP MFA gets the MFA challenge, not tokens (an email code is not a way around MFA)', async () => {
    const u = await register(w.t, tenant.apiKey);
    const setup = await bearerPost(w.t, '/v1/auth/mfa/totp/setup', u.access, {}).expect(200);
    const enabled = await bearerPost(w.t, '/v1/auth/mfa/totp/verify-setup', u.access, { code: authenticator.generate(setup.body.secret) }).expect(200);
    const res = await verify({ email: u.email, code: await requestCode(u.email) }).expect(200);
    expect(res.body).toEqual({ mfa_required: true, mfa_challenge_token: expect.any(String) });
    const done = await post(w.t, '/v1/auth/mfa/verify', tenant.apiKey, { mfa_challenge_token: res.body.mfa_challenge_token, code: enabled.body.recovery_codes[0] }).expect(200);
    expect(claims(done.body.access_token)).toMatchObject({ aal: 'AAL2', amr: expect.arrayContaining(['otp']) });
  });

  it('an email code then a TOTP code: amr says both factors ("otp" and "mfa", RFC 8176), aal AAL2', async () => {
    const u = await register(w.t, tenant.apiKey);
    await w.t.db.query(`UPDATE users SET email_verified = true WHERE id = $1`, [u.id]);
    const setup = await bearerPost(w.t, '/v1/auth/mfa/totp/setup', u.access, {}).expect(200);
    await bearerPost(w.t, '/v1/auth/mfa/totp/verify-setup', u.access, { code: authenticator.generate(setup.body.secret) }).expect(200);
    const res = await verify({ email: u.email, code: await requestCode(u.email) }).expect(200);
    // the enrollment used this time step's code: accept it once more for the test
    await w.t.db.query(`UPDATE user_mfa_factors SET last_used_step = 0 WHERE user_id = $1`, [u.id]);
    const done = await post(w.t, '/v1/auth/mfa/verify', tenant.apiKey, { mfa_challenge_token: res.body.mfa_challenge_token, code: authenticator.generate(setup.body.secret) }).expect(200);
    expect(claims(done.body.access_token)).toMatchObject({ aal: 'AAL2', amr: ['otp', 'mfa'] });
  });

  describe('tenant address policy under login_or_create', () => {
    let strict: TenantWithKey;
    beforeAll(async () => {
      strict = await tenantWithKey(w.t, { email_otp_enabled: true, block_disposable_emails: true, block_email_subaddresses: true });
      await w.t
        .http()
        .put(`/v1/auth/dashboard/tenants/${strict.slug}/settings/email-domains`)
        .set('Cookie', strict.cookie)
        .set('X-CSRF-Token', strict.csrf)
        .send({ blocklist: ['blocked.example'] })
        .expect(200);
    });

    it.each([
      ['a disposable address', 'x@mailinator.com', 'email/disposable_blocked'],
      ['a subaddress', 'x+tag@example.com', 'email/subaddress_blocked'],
      ['a blocked domain', 'x@eu.blocked.example', 'email/domain_blocked'],
    ])('%s: 422 with its code, and no mail', async (_n, email, code) => {
      const r = await request({ email, mode: 'login_or_create' }, strict.apiKey).expect(422);
      expect(r.body.code).toBe(code);
      expect(await outboxTo(w.t, email)).toEqual([]);
    });

    it('mode login creates nothing, so the policy is not consulted (202)', async () => {
      await request({ email: 'x@mailinator.com' }, strict.apiKey).expect(202);
    });
  });

  it('under minor protection a code creates no account (it cannot carry a date of birth): 400 user/date_of_birth_required, nothing created; an existing account signs in', async () => {
    const minor = await tenantWithKey(w.t, { email_otp_enabled: true });
    await w.t.db.query(`UPDATE tenants SET minor_protection_enabled = true WHERE id = $1`, [minor.tenantId]);
    await w.t.tenantChanged(minor.tenantId);
    const email = uniqueEmail('minor');
    const code = await requestCode(email, { mode: 'login_or_create' }, minor.apiKey);
    const res = await verify({ email, code }, minor.apiKey).expect(400);
    expect(res.body.code).toBe('user/date_of_birth_required');
    expect(await w.t.db.query(`SELECT 1 FROM users WHERE tenant_id = $1 AND email_normalized = $2`, [minor.tenantId, email])).toHaveLength(0);
    const registered = uniqueEmail('minor-registered');
    await w.t.http().post('/v1/auth/register').set('X-API-Key', minor.apiKey).set('X-Forwarded-For', randomIp()).send({ email: registered, password: STRONG_PASSWORD, consent: true, date_of_birth: '1990-01-01' }).expect(201);
    const again = await verify({ email: registered, code: await requestCode(registered, { mode: 'login_or_create' }, minor.apiKey) }, minor.apiKey).expect(200);
    expect(again.body.user.email).toBe(registered);
  });

  describe('captcha_token when the tenant requires it', () => {
    let siteverify: Server;
    let calls: URLSearchParams[];
    let url: string;
    let captcha: TenantWithKey;

    beforeAll(async () => {
      calls = [];
      siteverify = createServer((req, res) => {
        let body = '';
        req.on('data', (c) => (body += c));
        req.on('end', () => {
          const p = new URLSearchParams(body);
          calls.push(p);
          res.setHeader('content-type', 'application/json');
          // solved on the tenant's own site, not on the platform's sign-up pages
          res.end(JSON.stringify({ success: p.get('secret') === 'test-turnstile-secret' && p.get('response') === 'good-token', hostname: 'shop.tenant.example' }));
        });
      });
      await new Promise<void>((r) => siteverify.listen(0, '127.0.0.1', () => r()));
      url = `http://127.0.0.1:${(siteverify.address() as AddressInfo).port}/siteverify`;
      captcha = await tenantWithKey(w.t, { email_otp_enabled: true });
      await w.t.db.query(`UPDATE tenants SET email_otp_captcha_required = true WHERE id = $1`, [captcha.tenantId]);
    });
    afterAll(() => new Promise<void>((r) => siteverify.close(() => r())));

    it('missing or failing token: 400 captcha/failed and no mail; a good token passes (checked against siteverify with the client address)', async () => {
      // TURNSTILE_HOSTNAMES names the platform's sign-up pages: it does not apply to a tenant's captcha
      const app = await w.extraApp({ TURNSTILE_SECRET: 'test-turnstile-secret', TURNSTILE_SITEVERIFY_URL: url, TURNSTILE_HOSTNAMES: 'signup.platform.example' });
      const u = await register(w.t, captcha.apiKey);
      const ip = randomIp();
      const send = (extra: object) => post(app, '/v1/auth/email-otp', captcha.apiKey, { email: u.email, ...extra }, ip);
      expect((await send({}).expect(400)).body.code).toBe('captcha/failed');
      expect((await send({ captcha_token: 'bad-token' }).expect(400)).body.code).toBe('captcha/failed');
      expect((await outboxTo(w.t, u.email)).filter((o) => o.event_type === 'email.email_otp')).toEqual([]);
      await send({ captcha_token: 'good-token' }).expect(202);
      await codeMail(u.email);
      expect(calls.at(-1)?.get('remoteip')).toBe(ip);
      // tenants that do not require it are not asked
      await post(app, '/v1/auth/email-otp', tenant.apiKey, { email: u.email }).expect(202);
    });

    it("requests failing the captcha do not use up the address's mail quota (its owner still gets a code)", async () => {
      const app = await w.extraApp({ TURNSTILE_SECRET: 'test-turnstile-secret', TURNSTILE_SITEVERIFY_URL: url, RATE_LIMIT_EMAIL_PER_ADDRESS: '2' });
      const u = await register(w.t, captcha.apiKey);
      const send = (extra: object) => post(app, '/v1/auth/email-otp', captcha.apiKey, { email: u.email, ...extra }, randomIp());
      for (let i = 0; i < 4; i++) expect((await send({}).expect(400)).body.code).toBe('captcha/failed');
      await send({ captcha_token: 'good-token' }).expect(202);
      await send({ captcha_token: 'good-token' }).expect(202);
      // the quota (2 here) counts the requests that passed
      const third = await send({ captcha_token: 'good-token' }).expect(429);
      expect(Number(third.headers['retry-after'])).toBeGreaterThan(0);
    });

    it('a deployment without a Turnstile secret fails closed (503), never passes silently', async () => {
      const r = await request({ email: uniqueEmail(), captcha_token: 'good-token' }, captcha.apiKey).expect(503);
      expect(r.body.code).toBe('server/unavailable');
    });
  });

  it.each([
    ['email missing', { code: '123456' }, 'email'],
    ['email malformed', { email: 'nope', code: '123456' }, 'email'],
    ['code missing', { email: 'a@example.com' }, 'code'],
    ['code of 5 digits', { email: 'a@example.com', code: '12345' }, 'code'],
    ['code of 7 digits', { email: 'a@example.com', code: '1234567' }, 'code'],
    ['code with letters', { email: 'a@example.com', code: '12a456' }, 'code'],
    ['code as a number', { email: 'a@example.com', code: 123456 }, 'code'],
    ['resume_binding of 65 characters', { email: 'a@example.com', code: '123456', resume_binding: 'r'.repeat(65) }, 'resume_binding'],
    ['unknown property', { email: 'a@example.com', code: '123456', mode: 'login' }, 'mode'],
  ])('verify rejects %s with 400 request/invalid', async (_n, body, field) => {
    const r = await verify(body).expect(400);
    expect(r.body.code).toBe('request/invalid');
    expect(r.body.errors.map((e: { field: string }) => e.field)).toContain(field);
  });

  it.each([
    ['email missing', {}, 'email'],
    ['mode not in the enum', { email: 'a@example.com', mode: 'signup' }, 'mode'],
    ['mode null', { email: 'a@example.com', mode: null }, 'mode'],
    ['captcha_token not a string', { email: 'a@example.com', captcha_token: 1 }, 'captcha_token'],
    ['unknown property', { email: 'a@example.com', phone: '+15550100' }, 'phone'],
  ])('request rejects %s with 400 request/invalid', async (_n, body, field) => {
    const r = await request(body).expect(400);
    expect(r.body.code).toBe('request/invalid');
    expect(r.body.errors.map((e: { field: string }) => e.field)).toContain(field);
  });

  it('requests (resends) are limited per address and per client address: 429 + Retry-After', async () => {
    const low = await w.extraApp({ RATE_LIMIT_EMAIL_PER_ADDRESS: '2', RATE_LIMIT_EMAIL_PER_IP: '3' });
    const send = (email: string, ip = randomIp()) => post(low, '/v1/auth/email-otp', tenant.apiKey, { email }, ip);
    for (const email of [(await register(w.t, tenant.apiKey)).email, uniqueEmail('nobody')]) {
      await send(email).expect(202);
      await send(email).expect(202);
      const r = await send(email).expect(429);
      expect(Number(r.headers['retry-after'])).toBeGreaterThan(0);
    }
    const ip = randomIp();
    for (let i = 0; i < 3; i++) await send(uniqueEmail('spray'), ip).expect(202);
    expect((await send(uniqueEmail('spray'), ip).expect(429)).headers['retry-after']).toBeTruthy();
  });

  it('verification attempts are limited per client address (spraying many addresses)', async () => {
    const low = await w.extraApp({ RATE_LIMIT_CODE_VERIFY_PER_IP_PER_MIN: '3' });
    const ip = randomIp();
    for (let i = 0; i < 3; i++) await post(low, '/v1/auth/email-otp/verify', tenant.apiKey, { email: uniqueEmail(), code: '123456' }, ip).expect(401);
    expect((await post(low, '/v1/auth/email-otp/verify', tenant.apiKey, { email: uniqueEmail(), code: '123456' }, ip).expect(429)).headers['retry-after']).toBeTruthy();
  });
});
