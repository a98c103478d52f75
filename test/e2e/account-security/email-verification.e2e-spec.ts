import { randomIp, uniqueEmail } from '../../setup/app';
import {
  ACCOUNTS_URL,
  bearerPost,
  claims,
  linkToken,
  MailWorld,
  outboxTo,
  post,
  register,
  sha256Hex,
  startMailWorld,
  TenantWithKey,
  tenantWithKey,
} from './account-security.helpers';

describe('account security: email verification (issue 5 item 1)', () => {
  let w: MailWorld;
  let tenant: TenantWithKey;
  let other: TenantWithKey;

  beforeAll(async () => {
    w = await startMailWorld();
    tenant = await tenantWithKey(w.t);
    other = await tenantWithKey(w.t);
  }, 60_000);
  afterAll(() => w?.close());

  const verificationMail = (to: string) => w.nextMail((m) => m.to.includes(to) && m.subject.startsWith('Verify your email address'));
  const verify = (token: unknown, key = tenant.apiKey) => post(w.t, '/v1/auth/verify-email', key, { token });
  const resend = (email: unknown, key = tenant.apiKey, ip = randomIp()) => post(w.t, '/v1/auth/verify-email/resend', key, { email }, ip);

  it('register mails a verification link (text and HTML, tenant name); verify answers 204 and email_verified shows in /me and tokens', async () => {
    const u = await register(w.t, tenant.apiKey);
    expect(claims(u.access).email_verified).toBe(false);
    const mail = await verificationMail(u.email);
    expect(mail.subject).toBe(`Verify your email address for ${tenant.name}`);
    expect(mail.text).toContain(tenant.name);
    expect(mail.html).toContain(tenant.name);
    expect(mail.text).toContain(`${ACCOUNTS_URL}/verify-email?token=`);
    // a mailbox owner who did not sign up is told not to confirm someone else's account (pre-hijacking)
    for (const body of [mail.text, mail.html]) expect(body).toContain('If you did not create this account, do not use the link');
    const token = linkToken(mail, '/verify-email');
    expect(token.length).toBeGreaterThanOrEqual(43); // 256 bits, base64url

    // only the SHA-256 of the token is stored; the outbox kept it encrypted until the mail left
    // (worker.e2e-spec.ts: the job carries it encrypted, the settled row forgets it)
    const rows = await w.t.db.query<{ token_hash: string; kind: string }>(`SELECT token_hash, kind FROM account_tokens WHERE user_id = $1`, [u.id]);
    expect(rows).toEqual([{ token_hash: sha256Hex(token), kind: 'email_verification' }]);
    const [ob] = await outboxTo(w.t, u.email);
    expect(ob.payload).not.toContain(token);

    const me = () => w.t.http().get('/v1/auth/me').set('Authorization', `Bearer ${u.access}`);
    expect((await me().expect(200)).body.email_verified).toBe(false);
    const res = await verify(token).expect(204);
    expect(res.text).toBe('');
    expect((await me().expect(200)).body.email_verified).toBe(true);
    const refreshed = await post(w.t, '/v1/auth/refresh', tenant.apiKey, { refresh_token: u.refresh }).expect(200);
    expect(refreshed.body.user.email_verified).toBe(true);
    expect(claims(refreshed.body.access_token).email_verified).toBe(true);
    const logged = await post(w.t, '/v1/auth/login', tenant.apiKey, { email: u.email, password: u.password }).expect(200);
    expect(claims(logged.body.access_token).email_verified).toBe(true);
  });

  it('a verification link works once (a replay is 400 token/invalid); parallel uses have exactly one winner', async () => {
    const u = await register(w.t, tenant.apiKey);
    const token = linkToken(await verificationMail(u.email), '/verify-email');
    const results = await Promise.all(Array.from({ length: 8 }, () => verify(token)));
    expect(results.map((r) => r.status).sort()).toEqual([204, 400, 400, 400, 400, 400, 400, 400]);
    const again = await verify(token).expect(400);
    expect(again.headers['content-type']).toContain('application/problem+json');
    expect(again.body).toMatchObject({ status: 400, code: 'token/invalid' });
  });

  it("another tenant's API key cannot use the link (and does not burn it)", async () => {
    const u = await register(w.t, tenant.apiKey);
    const token = linkToken(await verificationMail(u.email), '/verify-email');
    expect((await verify(token, other.apiKey).expect(400)).body.code).toBe('token/invalid');
    await verify(token).expect(204);
  });

  it('a token of another kind is refused, and the verification token is refused elsewhere', async () => {
    const u = await register(w.t, tenant.apiKey);
    const vtoken = linkToken(await verificationMail(u.email), '/verify-email');
    await post(w.t, '/v1/auth/password/forgot', tenant.apiKey, { email: u.email }).expect(202);
    const rtoken = linkToken(await w.nextMail((m) => m.to.includes(u.email) && m.subject.startsWith('Reset your')), '/reset-password');
    expect((await verify(rtoken).expect(400)).body.code).toBe('token/invalid');
    expect((await post(w.t, '/v1/auth/password/reset', tenant.apiKey, { token: vtoken, password: 'another strong password' }).expect(400)).body.code).toBe('token/invalid');
    // both still work for what they are
    await verify(vtoken).expect(204);
    await post(w.t, '/v1/auth/password/reset', tenant.apiKey, { token: rtoken, password: 'another strong password' }).expect(204);
  });

  it('an expired link is refused', async () => {
    const u = await register(w.t, tenant.apiKey);
    const token = linkToken(await verificationMail(u.email), '/verify-email');
    await w.t.db.query(`UPDATE account_tokens SET expires_at = now() - interval '1 second' WHERE token_hash = $1`, [sha256Hex(token)]);
    expect((await verify(token).expect(400)).body.code).toBe('token/invalid');
  });

  it('a link for an address the user no longer has verifies nothing', async () => {
    const u = await register(w.t, tenant.apiKey);
    const token = linkToken(await verificationMail(u.email), '/verify-email');
    const moved = uniqueEmail('moved');
    await w.t.db.query(`UPDATE users SET email = $2, email_normalized = $2 WHERE id = $1`, [u.id, moved]);
    expect((await verify(token).expect(400)).body.code).toBe('token/invalid');
    const [row] = await w.t.db.query<{ email_verified: boolean }>(`SELECT email_verified FROM users WHERE id = $1`, [u.id]);
    expect(row.email_verified).toBe(false);
  });

  it('resend: 202 with the same body for an unverified, a verified and an unknown address; only the unverified one gets a new link, which replaces the old', async () => {
    const unverified = await register(w.t, tenant.apiKey);
    const first = linkToken(await verificationMail(unverified.email), '/verify-email');
    const verified = await register(w.t, tenant.apiKey);
    await verify(linkToken(await verificationMail(verified.email), '/verify-email')).expect(204);
    const unknown = uniqueEmail('nobody');

    const answers = await Promise.all([resend(unverified.email), resend(verified.email), resend(unknown)]);
    for (const a of answers) {
      expect(a.status).toBe(202);
      expect(a.body).toEqual(answers[0].body);
      expect(a.headers['content-type']).toBe(answers[0].headers['content-type']);
    }
    expect(answers[0].body).toEqual({ status: 'accepted', message: expect.any(String) });

    const second = linkToken(await verificationMail(unverified.email), '/verify-email');
    expect(second).not.toBe(first);
    expect((await outboxTo(w.t, verified.email)).map((r) => r.event_type)).toEqual(['email.email_verification']); // the one of registration
    expect(await outboxTo(w.t, unknown)).toEqual([]);
    expect((await verify(first).expect(400)).body.code).toBe('token/invalid');
    await verify(second).expect(204);
  });

  it('resend is case-insensitive on the address', async () => {
    const u = await register(w.t, tenant.apiKey);
    await verificationMail(u.email);
    await resend(u.email.toUpperCase()).expect(202);
    await verificationMail(u.email);
  });

  it.each([
    ['token missing', {}, 'token'],
    ['token empty', { token: '' }, 'token'],
    ['token not a string', { token: 42 }, 'token'],
    ['unknown property', { token: 'x', extra: 1 }, 'extra'],
  ])('verify-email rejects %s with 400 request/invalid', async (_n, body, field) => {
    const res = await post(w.t, '/v1/auth/verify-email', tenant.apiKey, body).expect(400);
    expect(res.body.code).toBe('request/invalid');
    expect(res.body.errors.map((e: { field: string }) => e.field)).toContain(field);
  });

  it.each([
    ['email missing', {}, 'email'],
    ['email malformed', { email: 'not-an-email' }, 'email'],
    ['email not a string', { email: ['a@b.c'] }, 'email'],
    ['unknown property', { email: 'a@example.com', user_id: 'x' }, 'user_id'],
  ])('resend rejects %s with 400 request/invalid', async (_n, body, field) => {
    const res = await post(w.t, '/v1/auth/verify-email/resend', tenant.apiKey, body).expect(400);
    expect(res.body.code).toBe('request/invalid');
    expect(res.body.errors.map((e: { field: string }) => e.field)).toContain(field);
  });

  it('both endpoints need a valid API key (the tenant comes from it)', async () => {
    expect((await post(w.t, '/v1/auth/verify-email', undefined, { token: 'x' }).expect(401)).body.code).toBe('auth/invalid_api_key');
    expect((await resend('a@example.com', 'authp_nope').expect(401)).body.code).toBe('auth/invalid_api_key');
  });

  it('resend is limited per address (known or not) and per client address: 429 with Retry-After', async () => {
    const lowIp = await w.extraApp({ RATE_LIMIT_EMAIL_PER_ADDRESS: '2', RATE_LIMIT_EMAIL_PER_IP: '3' });
    const send = (email: string, ip: string) => post(lowIp, '/v1/auth/verify-email/resend', tenant.apiKey, { email }, ip);
    for (const email of [uniqueEmail('nobody'), (await register(w.t, tenant.apiKey)).email]) {
      await send(email, randomIp()).expect(202);
      await send(email, randomIp()).expect(202);
      const limited = await send(email, randomIp()).expect(429);
      expect(limited.body.code).toBe('rate_limit/exceeded');
      expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
      expect(limited.headers['x-service-docs']).toBeTruthy();
    }
    const ip = randomIp();
    for (let i = 0; i < 3; i++) await send(uniqueEmail('spray'), ip).expect(202);
    expect(Number((await send(uniqueEmail('spray'), ip).expect(429)).headers['retry-after'])).toBeGreaterThan(0);
  });

  it('verify-email is limited per client address', async () => {
    const low = await w.extraApp({ RATE_LIMIT_CODE_VERIFY_PER_IP_PER_MIN: '2' });
    const ip = randomIp();
    await post(low, '/v1/auth/verify-email', tenant.apiKey, { token: 'a' }, ip).expect(400);
    await post(low, '/v1/auth/verify-email', tenant.apiKey, { token: 'b' }, ip).expect(400);
    const limited = await post(low, '/v1/auth/verify-email', tenant.apiKey, { token: 'c' }, ip).expect(429);
    expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
  });

  it('verify-email takes the tenant from X-API-Key: a bearer alone is 401', async () => {
    const u = await register(w.t, tenant.apiKey);
    await bearerPost(w.t, '/v1/auth/verify-email', u.access, { token: 'x' }).expect(401);
  });
});
