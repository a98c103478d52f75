import { randomUUID } from 'crypto';
import { authenticator } from 'otplib';
import { randomIp, uniqueEmail } from '../../setup/app';
import {
  ACCOUNTS_URL,
  bearerPost,
  claims,
  linkToken,
  MailWorld,
  outboxTo,
  patchSecurity,
  post,
  register,
  sha256Hex,
  startMailWorld,
  TenantWithKey,
  tenantWithKey,
} from './account-security.helpers';

const REDIRECT = 'https://app.example.test/callback';

describe('account security: magic link sign-in (issue 5 item 3)', () => {
  let w: MailWorld;
  let tenant: TenantWithKey;
  let other: TenantWithKey;
  let clientId: string;
  let otherClientId: string;

  const createClient = async (d: TenantWithKey, redirect_uris: string[]) =>
    (
      await w.t
        .http()
        .post(`/v1/auth/dashboard/tenants/${d.slug}/oauth-clients`)
        .set('Cookie', d.cookie)
        .set('X-CSRF-Token', d.csrf)
        .send({ name: 'web', client_type: 'public', redirect_uris })
        .expect(201)
    ).body.client_id as string;

  beforeAll(async () => {
    w = await startMailWorld();
    tenant = await tenantWithKey(w.t, { magic_link_enabled: true });
    other = await tenantWithKey(w.t, { magic_link_enabled: true });
    clientId = await createClient(tenant, [REDIRECT]);
    // a native app's private-use scheme (RFC 8252 7.1), added as a client registered before such schemes were accepted
    await w.t.db.query(`UPDATE oauth_clients SET redirect_uris = redirect_uris || '{com.example.app:/oauth}'::text[] WHERE id = $1`, [clientId]);
    otherClientId = await createClient(other, [REDIRECT]);
  }, 60_000);
  afterAll(() => w?.close());

  const request = (body: unknown, key = tenant.apiKey, ip = randomIp()) => post(w.t, '/v1/auth/magic-link', key, body, ip);
  const verify = (body: unknown, key = tenant.apiKey) => post(w.t, '/v1/auth/magic-link/verify', key, body);
  const linkMail = (to: string) => w.nextMail((m) => m.to.includes(to) && m.subject.startsWith('Your sign-in link'));
  const requestToken = async (email: string, extra: object = {}) => {
    await request({ email, ...extra }).expect(202);
    return linkToken(await linkMail(email), '/magic-link');
  };

  it('is off until the tenant enables it: 403 magic_link/disabled, nothing sent', async () => {
    const off = await tenantWithKey(w.t);
    const u = await register(w.t, off.apiKey);
    const r = await request({ email: u.email }, off.apiKey).expect(403);
    expect(r.body.code).toBe('magic_link/disabled');
    expect((await verify({ token: 'x' }, off.apiKey).expect(403)).body.code).toBe('magic_link/disabled');
    expect((await outboxTo(w.t, u.email)).map((o) => o.event_type)).toEqual(['email.email_verification']);
  });

  it('mails a link (text and HTML, tenant name, 15 minutes); verify signs in with amr ["email"] and marks the address verified', async () => {
    const u = await register(w.t, tenant.apiKey);
    const res = await request({ email: u.email }).expect(202);
    expect(res.body).toEqual({ status: 'accepted', message: expect.any(String) });
    const mail = await linkMail(u.email);
    expect(mail.subject).toBe(`Your sign-in link for ${tenant.name}`);
    expect(mail.text).toContain('15 minutes');
    expect(mail.html).toContain(tenant.name);
    expect(mail.text).toContain(`${ACCOUNTS_URL}/magic-link?token=`);
    const token = linkToken(mail, '/magic-link');
    const [row] = await w.t.db.query<{ token_hash: string; ttl: number }>(
      `SELECT token_hash, extract(epoch FROM expires_at - created_at)::int AS ttl FROM account_tokens WHERE user_id = $1 AND kind = 'magic_link'`,
      [u.id],
    );
    expect(row).toEqual({ token_hash: sha256Hex(token), ttl: 900 });

    const signed = await verify({ token }).expect(200);
    expect(signed.body).toEqual({
      access_token: expect.any(String),
      refresh_token: expect.stringMatching(/^[0-9a-f-]{36}:[A-Za-z0-9_-]{43}$/),
      expires_in: 900,
      token_type: 'Bearer',
      user: { id: u.id, email: u.email, email_verified: true, is_anonymous: false, created_at: expect.any(String) },
    });
    expect(claims(signed.body.access_token)).toMatchObject({ sub: u.id, tenant_id: tenant.tenantId, amr: ['email'], aal: 'AAL1', email_verified: true });
    const me = await w.t.http().get('/v1/auth/me').set('Authorization', `Bearer ${signed.body.access_token}`).expect(200);
    expect(me.body.email_verified).toBe(true);
    await post(w.t, '/v1/auth/refresh', tenant.apiKey, { refresh_token: signed.body.refresh_token }).expect(200);
  });

  it('parallel requests leave one live link per kind: the last issued replaces the others (magic link and password reset)', async () => {
    for (let round = 0; round < 2; round++) {
      const u = await register(w.t, tenant.apiKey);
      const answers = await Promise.all([
        ...Array.from({ length: 5 }, () => request({ email: u.email })),
        ...Array.from({ length: 5 }, () => post(w.t, '/v1/auth/password/forgot', tenant.apiKey, { email: u.email }, randomIp())),
      ]);
      expect(answers.map((r) => r.status)).toEqual(Array(10).fill(202));
      const live = await w.t.db.query<{ kind: string; n: number }>(
        `SELECT kind, count(*)::int AS n FROM account_tokens WHERE user_id = $1 AND used_at IS NULL AND expires_at > now() GROUP BY kind ORDER BY kind`,
        [u.id],
      );
      expect(live).toEqual([
        { kind: 'email_verification', n: 1 },
        { kind: 'magic_link', n: 1 },
        { kind: 'password_reset', n: 1 },
      ]);
    }
  });

  it('an unknown address gets the same status and body and no mail; magic links never create accounts', async () => {
    const known = await register(w.t, tenant.apiKey);
    const unknown = uniqueEmail('nobody');
    const [a, b] = await Promise.all([request({ email: known.email }), request({ email: unknown })]);
    expect([a.status, b.status]).toEqual([202, 202]);
    expect(b.body).toEqual(a.body);
    await linkMail(known.email);
    expect(await outboxTo(w.t, unknown)).toEqual([]);
    const [n] = await w.t.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM users WHERE email_normalized = $1`, [unknown]);
    expect(n.n).toBe(0);
  });

  it('works once: a replay is 400, parallel verifies have exactly one winner', async () => {
    const u = await register(w.t, tenant.apiKey);
    const token = await requestToken(u.email);
    const results = await Promise.all(Array.from({ length: 6 }, () => verify({ token })));
    expect(results.map((r) => r.status).sort()).toEqual([200, 400, 400, 400, 400, 400]);
    expect((await verify({ token }).expect(400)).body.code).toBe('token/invalid');
  });

  it("is bound to its tenant: another tenant's key fails (and does not burn it)", async () => {
    const email = uniqueEmail('both');
    await register(w.t, tenant.apiKey, email);
    await register(w.t, other.apiKey, email);
    const token = await requestToken(email);
    expect((await verify({ token }, other.apiKey).expect(400)).body.code).toBe('token/invalid');
    const ok = await verify({ token }).expect(200);
    expect(claims(ok.body.access_token).tenant_id).toBe(tenant.tenantId);
  });

  it('a token of another kind is refused (verification link, reset link)', async () => {
    const u = await register(w.t, tenant.apiKey);
    const vtoken = linkToken(await w.nextMail((m) => m.to.includes(u.email) && m.subject.startsWith('Verify')), '/verify-email');
    expect((await verify({ token: vtoken }).expect(400)).body.code).toBe('token/invalid');
    await post(w.t, '/v1/auth/password/forgot', tenant.apiKey, { email: u.email }).expect(202);
    const rtoken = linkToken(await w.nextMail((m) => m.to.includes(u.email) && m.subject.startsWith('Reset')), '/reset-password');
    expect((await verify({ token: rtoken }).expect(400)).body.code).toBe('token/invalid');
    const mtoken = await requestToken(u.email);
    expect((await post(w.t, '/v1/auth/verify-email', tenant.apiKey, { token: mtoken }).expect(400)).body.code).toBe('token/invalid');
    await verify({ token: mtoken }).expect(200);
  });

  it('expires after 15 minutes; a newer link replaces an older one', async () => {
    const u = await register(w.t, tenant.apiKey);
    const first = await requestToken(u.email);
    const second = await requestToken(u.email);
    expect((await verify({ token: first }).expect(400)).body.code).toBe('token/invalid');
    await w.t.db.query(`UPDATE account_tokens SET expires_at = now() - interval '1 second' WHERE token_hash = $1`, [sha256Hex(second)]);
    expect((await verify({ token: second }).expect(400)).body.code).toBe('token/invalid');
  });

  describe('oauth_params', () => {
    const params = (over: object = {}) => ({ client_id: clientId, redirect_uri: REDIRECT, response_type: 'code', state: 's1', code_challenge: 'abc', code_challenge_method: 'S256', scope: 'openid', nonce: 'n', resource: 'https://api.example.test', ...over });

    it('a registered redirect_uri: the link is sent and the verification resumes the authorization request', async () => {
      const u = await register(w.t, tenant.apiKey);
      const token = await requestToken(u.email, { oauth_params: params() });
      const res = await verify({ token }).expect(200);
      expect(res.body.oauth_params).toEqual(params());
      const native = await requestToken(u.email, { oauth_params: { client_id: clientId, redirect_uri: 'com.example.app:/oauth' } });
      expect((await verify({ token: native }).expect(200)).body.oauth_params).toEqual({ client_id: clientId, redirect_uri: 'com.example.app:/oauth' });
    });

    it('a user with MFA: the challenge keeps them and POST /v1/auth/mfa/verify answers them with the AAL2 tokens', async () => {
      const u = await register(w.t, tenant.apiKey);
      await w.t.db.query(`UPDATE users SET email_verified = true WHERE id = $1`, [u.id]); // keeps its password (see pre-account-takeover)
      const setup = await bearerPost(w.t, '/v1/auth/mfa/totp/setup', u.access, {}).expect(200);
      const enabled = await bearerPost(w.t, '/v1/auth/mfa/totp/verify-setup', u.access, { code: authenticator.generate(setup.body.secret) }).expect(200);
      const token = await requestToken(u.email, { oauth_params: params() });
      const challenged = await verify({ token }).expect(200);
      expect(challenged.body).toEqual({ mfa_required: true, mfa_challenge_token: expect.any(String) });
      const done = await post(w.t, '/v1/auth/mfa/verify', tenant.apiKey, { mfa_challenge_token: challenged.body.mfa_challenge_token, code: enabled.body.recovery_codes[0] }).expect(200);
      expect(done.body.oauth_params).toEqual(params());
      expect(claims(done.body.access_token)).toMatchObject({ sub: u.id, aal: 'AAL2', amr: expect.arrayContaining(['email']) });
      // a password sign-in's MFA answer has no oauth_params
      const pwd = await post(w.t, '/v1/auth/login', tenant.apiKey, { email: u.email, password: u.password }).expect(200);
      const plain = await post(w.t, '/v1/auth/mfa/verify', tenant.apiKey, { mfa_challenge_token: pwd.body.mfa_challenge_token, code: enabled.body.recovery_codes[1] }).expect(200);
      expect(plain.body.oauth_params).toBeUndefined();
    });

    it.each([
      ['a redirect_uri not registered for the client', () => params({ redirect_uri: 'https://evil.example.test/callback' })],
      ['a registered URI with another path', () => params({ redirect_uri: `${REDIRECT}/more` })],
      ['a client of another tenant', () => params({ client_id: otherClientId })],
      ['an unknown client', () => params({ client_id: randomUUID() })],
      ['a client_id that is not an id', () => params({ client_id: 'web-app' })],
    ])('%s: 400 and nothing is sent, for known and unknown addresses alike', async (_n, p) => {
      const u = await register(w.t, tenant.apiKey);
      const unknown = uniqueEmail('nobody');
      for (const email of [u.email, unknown]) {
        const r = await request({ email, oauth_params: p() }).expect(400);
        expect(r.body.code).toBe('oauth_params/invalid_redirect_uri');
      }
      expect((await outboxTo(w.t, u.email)).map((o) => o.event_type)).toEqual(['email.email_verification']);
    });

    it('a revoked client: 400', async () => {
      const revoked = await createClient(tenant, [REDIRECT]);
      await w.t.db.query(`UPDATE oauth_clients SET revoked_at = now() WHERE id = $1`, [revoked]);
      const u = await register(w.t, tenant.apiKey);
      expect((await request({ email: u.email, oauth_params: params({ client_id: revoked }) }).expect(400)).body.code).toBe('oauth_params/invalid_redirect_uri');
    });

    it("revoking a client ends the sign-ins under way for it (links mailed with its authorization request); another client's go on", async () => {
      const doomed = await createClient(tenant, [REDIRECT]);
      const u = await register(w.t, tenant.apiKey);
      const link = await requestToken(u.email, { oauth_params: params({ client_id: doomed }) });
      const v = await register(w.t, tenant.apiKey);
      const kept = await requestToken(v.email, { oauth_params: params() });
      await w.t.http().delete(`/v1/auth/dashboard/tenants/${tenant.slug}/oauth-clients/${doomed}`).set('Cookie', tenant.cookie).set('X-CSRF-Token', tenant.csrf).expect(200);
      expect((await verify({ token: link }).expect(400)).body.code).toBe('token/invalid');
      expect((await verify({ token: kept }).expect(200)).body.oauth_params).toEqual(params());
    });

    it.each([
      ['client_id missing', { redirect_uri: REDIRECT }, 'oauth_params.client_id'],
      ['redirect_uri missing', { client_id: 'x' }, 'oauth_params.redirect_uri'],
      ['redirect_uri not a URI', { client_id: 'x', redirect_uri: 'not a uri' }, 'oauth_params.redirect_uri'],
      ['redirect_uri with a fragment', { client_id: 'x', redirect_uri: `${REDIRECT}#frag` }, 'oauth_params.redirect_uri'],
      ['state not a string', { client_id: 'x', redirect_uri: REDIRECT, state: 5 }, 'oauth_params.state'],
      ['state null (optional, not nullable)', { client_id: 'x', redirect_uri: REDIRECT, state: null }, 'oauth_params.state'],
      ['code_challenge null', { client_id: 'x', redirect_uri: REDIRECT, code_challenge: null }, 'oauth_params.code_challenge'],
      ['an unknown property', { client_id: 'x', redirect_uri: REDIRECT, prompt: 'none' }, 'oauth_params.prompt'],
    ])('oauth_params with %s: 400 request/invalid', async (_n, p, field) => {
      const r = await request({ email: uniqueEmail(), oauth_params: p }).expect(400);
      expect(r.body.code).toBe('request/invalid');
      expect(r.body.errors.map((e: { field: string }) => e.field)).toContain(field);
    });

    it('oauth_params that is not an object: 400', async () => {
      expect((await request({ email: uniqueEmail(), oauth_params: 'client_id=x' }).expect(400)).body.code).toBe('request/invalid');
    });
  });

  describe('resume_binding', () => {
    it('a link requested with a binding completes only with the same value (wrong or missing ones do not burn it)', async () => {
      const u = await register(w.t, tenant.apiKey);
      const binding = sha256Hex('browser-secret');
      const token = await requestToken(u.email, { resume_binding: binding });
      const [row] = await w.t.db.query<{ binding_hash: string }>(`SELECT binding_hash FROM account_tokens WHERE token_hash = $1`, [sha256Hex(token)]);
      expect(row.binding_hash).toBe(sha256Hex(binding)); // stored hashed
      expect((await verify({ token }).expect(400)).body.code).toBe('auth/resume_binding_mismatch');
      expect((await verify({ token, resume_binding: sha256Hex('other-browser') }).expect(400)).body.code).toBe('auth/resume_binding_mismatch');
      await verify({ token, resume_binding: binding }).expect(200);
    });

    it('a link requested without a binding ignores one given at verification', async () => {
      const u = await register(w.t, tenant.apiKey);
      const token = await requestToken(u.email);
      await verify({ token, resume_binding: 'anything' }).expect(200);
    });

    it('more than 64 characters: 400 at request and at verification', async () => {
      expect((await request({ email: uniqueEmail(), resume_binding: 'b'.repeat(65) }).expect(400)).body.errors[0].field).toBe('resume_binding');
      expect((await verify({ token: 'x', resume_binding: 'b'.repeat(65) }).expect(400)).body.errors[0].field).toBe('resume_binding');
      await verify({ token: 'x', resume_binding: 'b'.repeat(64) }).expect(400).expect((r) => expect(r.body.code).toBe('token/invalid'));
    });
  });

  it.each([
    ['email missing', {}, 'email'],
    ['email malformed', { email: 'x@' }, 'email'],
    ['unknown property', { email: 'a@example.com', mode: 'login' }, 'mode'],
    ['an oauth_params state over 1024 characters', { email: 'a@example.com', oauth_params: { client_id: 'c', redirect_uri: 'https://app.example/cb', state: 's'.repeat(1025) } }, 'oauth_params.state'],
    ['an oauth_params code_challenge over 128 characters', { email: 'a@example.com', oauth_params: { client_id: 'c', redirect_uri: 'https://app.example/cb', code_challenge: 'c'.repeat(129) } }, 'oauth_params.code_challenge'],
  ])('request rejects %s with 400 request/invalid', async (_n, body, field) => {
    const r = await request(body).expect(400);
    expect(r.body.code).toBe('request/invalid');
    expect(r.body.errors.map((e: { field: string }) => e.field)).toContain(field);
  });

  it.each([
    ['token missing', {}, 'token'],
    ['token empty', { token: '' }, 'token'],
    ['unknown property', { token: 'x', email: 'a@b.c' }, 'email'],
  ])('verify rejects %s with 400 request/invalid', async (_n, body, field) => {
    const r = await verify(body).expect(400);
    expect(r.body.code).toBe('request/invalid');
    expect(r.body.errors.map((e: { field: string }) => e.field)).toContain(field);
  });

  it('requests are limited per address and per client address (429 + Retry-After)', async () => {
    const low = await w.extraApp({ RATE_LIMIT_EMAIL_PER_ADDRESS: '1', RATE_LIMIT_EMAIL_PER_IP: '3' });
    const send = (email: string, ip = randomIp()) => post(low, '/v1/auth/magic-link', tenant.apiKey, { email }, ip);
    const u = await register(w.t, tenant.apiKey);
    await send(u.email).expect(202);
    const r = await send(u.email).expect(429);
    expect(Number(r.headers['retry-after'])).toBeGreaterThan(0);
    const ip = randomIp();
    for (let i = 0; i < 3; i++) await send(uniqueEmail('spray'), ip).expect(202);
    await send(uniqueEmail('spray'), ip).expect(429);
  });

  it('a user with TOTP MFA gets the MFA challenge, not tokens; the MFA step keeps "email" as the first factor (AAL2)', async () => {
    const u = await register(w.t, tenant.apiKey);
    const setup = await bearerPost(w.t, '/v1/auth/mfa/totp/setup', u.access, {}).expect(200);
    const enabled = await bearerPost(w.t, '/v1/auth/mfa/totp/verify-setup', u.access, { code: authenticator.generate(setup.body.secret) }).expect(200);
    const token = await requestToken(u.email);
    const res = await verify({ token }).expect(200);
    expect(res.body).toEqual({ mfa_required: true, mfa_challenge_token: expect.any(String) });
    const done = await post(w.t, '/v1/auth/mfa/verify', tenant.apiKey, { mfa_challenge_token: res.body.mfa_challenge_token, code: enabled.body.recovery_codes[0] }).expect(200);
    const c = claims(done.body.access_token);
    expect(c.aal).toBe('AAL2');
    expect(c.amr).toEqual(expect.arrayContaining(['email']));
    expect(c.amr).not.toContain('pwd');
  });

  it('switching magic links off stops outstanding links too, for good: switched on again, they stay void', async () => {
    const t2 = await tenantWithKey(w.t, { magic_link_enabled: true });
    const u = await register(w.t, t2.apiKey);
    await post(w.t, '/v1/auth/magic-link', t2.apiKey, { email: u.email }).expect(202);
    const token = linkToken(await linkMail(u.email), '/magic-link');
    await patchSecurity(w.t, t2, { magic_link_enabled: false }).expect(200);
    expect((await verify({ token }, t2.apiKey).expect(403)).body.code).toBe('magic_link/disabled');
    await patchSecurity(w.t, t2, { magic_link_enabled: true }).expect(200);
    expect((await verify({ token }, t2.apiKey).expect(400)).body.code).toBe('token/invalid');
  });

  it("switching magic links off voids the MFA challenges they opened (401 mfa/invalid_challenge), for good; a password's challenge and another tenant's stay", async () => {
    const enrolled = async (key: string) => {
      const u = await register(w.t, key);
      await w.t.db.query(`UPDATE users SET email_verified = true WHERE id = $1`, [u.id]); // keeps its password (see pre-account-takeover)
      const setup = await bearerPost(w.t, '/v1/auth/mfa/totp/setup', u.access, {}).expect(200);
      const done = await bearerPost(w.t, '/v1/auth/mfa/totp/verify-setup', u.access, { code: authenticator.generate(setup.body.secret) }).expect(200);
      return { ...u, recovery: done.body.recovery_codes as string[] };
    };
    const challengeByLink = async (email: string, key: string) => {
      await post(w.t, '/v1/auth/magic-link', key, { email }).expect(202);
      const res = await verify({ token: linkToken(await linkMail(email), '/magic-link') }, key).expect(200);
      expect(res.body).toEqual({ mfa_required: true, mfa_challenge_token: expect.any(String) });
      return res.body.mfa_challenge_token as string;
    };
    const mfaVerify = (key: string, challenge: string, code: string) => post(w.t, '/v1/auth/mfa/verify', key, { mfa_challenge_token: challenge, code });
    const t2 = await tenantWithKey(w.t, { magic_link_enabled: true });
    const u = await enrolled(t2.apiKey);
    const byLink = await challengeByLink(u.email, t2.apiKey);
    const byPassword = (await post(w.t, '/v1/auth/login', t2.apiKey, { email: u.email, password: u.password }).expect(200)).body.mfa_challenge_token as string;
    expect(byPassword).toEqual(expect.any(String));
    const v = await enrolled(tenant.apiKey);
    const elsewhere = await challengeByLink(v.email, tenant.apiKey);

    await patchSecurity(w.t, t2, { magic_link_enabled: false }).expect(200);
    await patchSecurity(w.t, t2, { magic_link_enabled: true }).expect(200);
    const refused = await mfaVerify(t2.apiKey, byLink, u.recovery[0]).expect(401);
    expect(refused.body.code).toBe('mfa/invalid_challenge');
    // the refused challenge spent no code: the password's challenge completes with the same one
    const ok = await mfaVerify(t2.apiKey, byPassword, u.recovery[0]).expect(200);
    expect(claims(ok.body.access_token)).toMatchObject({ aal: 'AAL2', amr: expect.arrayContaining(['pwd']) });
    await mfaVerify(tenant.apiKey, elsewhere, v.recovery[0]).expect(200);

    // a challenge the sign-in made just after the switch's void (the race the void cannot see):
    // refused while magic links are off, whatever its row says
    const late = await challengeByLink(u.email, t2.apiKey);
    await w.t.db.query(`UPDATE tenants SET magic_link_enabled = false WHERE id = $1`, [t2.tenantId]);
    expect((await mfaVerify(t2.apiKey, late, u.recovery[1]).expect(401)).body.code).toBe('mfa/invalid_challenge');
    // and for good: switched on again, it stays refused
    await w.t.db.query(`UPDATE tenants SET magic_link_enabled = true WHERE id = $1`, [t2.tenantId]);
    expect((await mfaVerify(t2.apiKey, late, u.recovery[1]).expect(401)).body.code).toBe('mfa/invalid_challenge');
  });
});
