import Redis from 'ioredis';
import { REDIS } from '../../../src/shared/redis/redis.module';
import { signupTenant } from '../../factories/dashboard.factory';
import { randomIp, STRONG_PASSWORD, uniqueEmail } from '../../setup/app';
import { expectedClientHash, plainSha256Prefix } from '../../setup/client-hash';
import {
  ACCOUNTS_URL,
  bearerPost,
  claims,
  linkToken,
  login,
  mailCode,
  MailWorld,
  median,
  outboxTo,
  post,
  register,
  sha256Hex,
  startMailWorld,
  TenantWithKey,
  tenantWithKey,
} from './account-security.helpers';

const NEW_PASSWORD = 'a brand new passphrase 42';

describe('account security: password forgot, reset and change (issue 5 item 2)', () => {
  let w: MailWorld;
  let tenant: TenantWithKey;
  let other: TenantWithKey;

  beforeAll(async () => {
    w = await startMailWorld();
    tenant = await tenantWithKey(w.t, { magic_link_enabled: true, email_otp_enabled: true });
    other = await tenantWithKey(w.t);
  }, 60_000);
  afterAll(() => w?.close());

  const forgot = (email: unknown, key = tenant.apiKey, ip = randomIp()) => post(w.t, '/v1/auth/password/forgot', key, { email }, ip);
  const reset = (token: unknown, password: unknown = NEW_PASSWORD, key = tenant.apiKey) => post(w.t, '/v1/auth/password/reset', key, { token, password });
  const change = (access: string, body: unknown, ip = randomIp()) => bearerPost(w.t, '/v1/auth/password/change', access, body, ip);
  const resetMail = (to: string) => w.nextMail((m) => m.to.includes(to) && m.subject.startsWith('Reset your'));
  const changedMail = (to: string) => w.nextMail((m) => m.to.includes(to) && m.subject.includes('password was changed'));
  const resetToken = async (email: string) => {
    await forgot(email).expect(202);
    return linkToken(await resetMail(email), '/reset-password');
  };

  it('forgot mails a reset link (text and HTML, tenant name, 30 minutes); the token has 256 bits and only its hash is stored', async () => {
    const u = await register(w.t, tenant.apiKey);
    const res = await forgot(u.email).expect(202);
    expect(res.body).toEqual({ status: 'accepted', message: expect.any(String) });
    const mail = await resetMail(u.email);
    expect(mail.subject).toBe(`Reset your ${tenant.name} password`);
    expect(mail.text).toContain('30 minutes');
    expect(mail.html).toContain(tenant.name);
    expect(mail.text).toContain(`${ACCOUNTS_URL}/reset-password?token=`);
    const token = linkToken(mail, '/reset-password');
    expect(Buffer.from(token, 'base64url').length).toBeGreaterThanOrEqual(16);
    const [row] = await w.t.db.query<{ token_hash: string; ttl: number }>(
      `SELECT token_hash, extract(epoch FROM expires_at - created_at)::int AS ttl FROM account_tokens WHERE user_id = $1 AND kind = 'password_reset'`,
      [u.id],
    );
    expect(row).toEqual({ token_hash: sha256Hex(token), ttl: 1800 });
  });

  it('forgot answers an unknown address with the same status and body, sends nothing, and takes comparable time', async () => {
    const known = await register(w.t, tenant.apiKey);
    const unknown = uniqueEmail('nobody');
    const a = await forgot(known.email).expect(202);
    const b = await forgot(unknown).expect(202);
    expect(b.body).toEqual(a.body);
    expect(b.headers['content-type']).toBe(a.headers['content-type']);
    await resetMail(known.email);
    expect(await outboxTo(w.t, unknown)).toEqual([]);
    // the tenant's audit log records the attempt with keyed hash prefixes only: a plain SHA-256 of
    // an address is reversed by hashing candidate addresses
    const ip = randomIp();
    const probe = uniqueEmail('Probe');
    await forgot(probe, tenant.apiKey, ip).expect(202);
    const rows = await w.t.db.query<{ metadata: Record<string, unknown> }>(
      `SELECT metadata FROM audit_events WHERE type = 'user.password_reset_requested' AND metadata->>'ip_hash_prefix' = $1`,
      [expectedClientHash(ip)],
    );
    expect(rows).toHaveLength(1);
    expect(rows[0].metadata).toEqual({ email_hash_prefix: expectedClientHash(probe.toLowerCase()), ip_hash_prefix: expectedClientHash(ip), mail_sent: false });
    expect(rows[0].metadata.email_hash_prefix).not.toBe(plainSha256Prefix(probe.toLowerCase()));
    expect(JSON.stringify(rows[0].metadata)).not.toContain(probe.toLowerCase().split('@')[0]);

    // timing: interleaved requests, medians compared with a generous bound (no enumeration by timing)
    const knownTimes: number[] = [];
    const unknownTimes: number[] = [];
    const users = [known.email, ...(await Promise.all([1, 2, 3, 4].map(() => register(w.t, tenant.apiKey)))).map((u) => u.email)];
    for (let i = 0; i < 10; i++) {
      let t0 = performance.now();
      await forgot(users[i % users.length]).expect(202);
      knownTimes.push(performance.now() - t0);
      t0 = performance.now();
      await forgot(uniqueEmail('nobody')).expect(202);
      unknownTimes.push(performance.now() - t0);
    }
    const [k, u] = [median(knownTimes), median(unknownTimes)];
    expect(Math.abs(k - u)).toBeLessThan(Math.max(25, 0.75 * Math.max(k, u)));
  });

  it('reset sets the new password, ends every session (refresh and access tokens), mails the user, and leaves email_verified alone', async () => {
    const u = await register(w.t, tenant.apiKey);
    const second = await login(w.t, tenant.apiKey, u.email);
    const token = await resetToken(u.email);
    await reset(token).expect(204);

    await post(w.t, '/v1/auth/login', tenant.apiKey, { email: u.email, password: STRONG_PASSWORD }).expect(401);
    const fresh = await login(w.t, tenant.apiKey, u.email, NEW_PASSWORD);
    for (const r of [u.refresh, second.refresh]) await post(w.t, '/v1/auth/refresh', tenant.apiKey, { refresh_token: r }).expect(401);
    for (const a of [u.access, second.access]) await w.t.http().get('/v1/auth/me').set('Authorization', `Bearer ${a}`).expect(401);
    await w.t.http().get('/v1/auth/me').set('Authorization', `Bearer ${fresh.access}`).expect(200);

    const mail = await changedMail(u.email);
    expect(mail.text).toContain(tenant.name);
    expect(mail.html).toContain(tenant.name);
    expect(mail.text).not.toContain('token=');
    // a reset proves the mailbox but is not a verification (documented decision)
    expect(claims(fresh.access).email_verified).toBe(false);
  });

  it('a reset link works once; parallel resets with one link have exactly one winner', async () => {
    const u = await register(w.t, tenant.apiKey);
    const token = await resetToken(u.email);
    const results = await Promise.all(['first password ok 1', 'second password ok 2', 'third password ok 33'].map((p) => reset(token, p)));
    expect(results.map((r) => r.status).sort()).toEqual([204, 400, 400]);
    expect((await reset(token).expect(400)).body.code).toBe('token/invalid');
    const winner = ['first password ok 1', 'second password ok 2', 'third password ok 33'][results.findIndex((r) => r.status === 204)];
    await login(w.t, tenant.apiKey, u.email, winner);
  });

  it('a new reset link replaces the previous one; an expired link is refused', async () => {
    const u = await register(w.t, tenant.apiKey);
    const first = await resetToken(u.email);
    const second = await resetToken(u.email);
    expect((await reset(first).expect(400)).body.code).toBe('token/invalid');
    await w.t.db.query(`UPDATE account_tokens SET expires_at = now() - interval '1 second' WHERE token_hash = $1`, [sha256Hex(second)]);
    expect((await reset(second).expect(400)).body.code).toBe('token/invalid');
    await login(w.t, tenant.apiKey, u.email); // unchanged
  });

  it("another tenant's key and another kind of token are refused", async () => {
    const u = await register(w.t, tenant.apiKey);
    const token = await resetToken(u.email);
    expect((await reset(token, NEW_PASSWORD, other.apiKey).expect(400)).body.code).toBe('token/invalid');
    // a magic link token is not a reset token, nor the reverse
    await post(w.t, '/v1/auth/magic-link', tenant.apiKey, { email: u.email }).expect(202);
    const magic = linkToken(await w.nextMail((m) => m.to.includes(u.email) && m.subject.startsWith('Your sign-in link')), '/magic-link');
    expect((await reset(magic).expect(400)).body.code).toBe('token/invalid');
    expect((await post(w.t, '/v1/auth/magic-link/verify', tenant.apiKey, { token }).expect(400)).body.code).toBe('token/invalid');
    await reset(token).expect(204);
    // the reset voided the outstanding magic link
    expect((await post(w.t, '/v1/auth/magic-link/verify', tenant.apiKey, { token: magic }).expect(400)).body.code).toBe('token/invalid');
  });

  it('a reset voids an email sign-in code issued before it, as it voids magic links', async () => {
    const u = await register(w.t, tenant.apiKey);
    await post(w.t, '/v1/auth/email-otp', tenant.apiKey, { email: u.email }).expect(202);
    const code = mailCode(await w.nextMail((m) => m.to.includes(u.email) && m.subject.endsWith('verification code')));
    await reset(await resetToken(u.email)).expect(204);
    const res = await post(w.t, '/v1/auth/email-otp/verify', tenant.apiKey, { email: u.email, code }).expect(401);
    expect(res.body.access_token).toBeUndefined();
    // a code asked for after the reset signs in
    await post(w.t, '/v1/auth/email-otp', tenant.apiKey, { email: u.email }).expect(202);
    const fresh = mailCode(await w.nextMail((m) => m.to.includes(u.email) && m.subject.endsWith('verification code')));
    await post(w.t, '/v1/auth/email-otp/verify', tenant.apiKey, { email: u.email, code: fresh }).expect(200);
  });

  it("a reset ends the MFA enrollment-only token opened with the old password (whoever knew it cannot enroll their own factor and lock the owner out)", async () => {
    const enforced = await tenantWithKey(w.t);
    const u = await register(w.t, enforced.apiKey);
    // the tenant requires MFA and this user's grace is over: sign-in answers an enrollment-only token
    await w.t.db.query(`UPDATE users SET created_at = now() - interval '60 days' WHERE id = $1`, [u.id]);
    await w.t.db.query(`UPDATE tenants SET mfa_policy = 'required', mfa_grace_period_days = 3, mfa_required_since = now() - interval '10 days' WHERE id = $1`, [enforced.tenantId]);
    const enrollment = async (password = STRONG_PASSWORD) => (await post(w.t, '/v1/auth/login', enforced.apiKey, { email: u.email, password }).expect(403)).body.enrollment_token as string;
    const setup = (token: string) => bearerPost(w.t, '/v1/auth/mfa/totp/setup', token, undefined);
    const old = await enrollment();
    await setup(old).expect(200);
    await post(w.t, '/v1/auth/password/forgot', enforced.apiKey, { email: u.email }).expect(202);
    const token = linkToken(await resetMail(u.email), '/reset-password');
    await post(w.t, '/v1/auth/password/reset', enforced.apiKey, { token, password: NEW_PASSWORD }).expect(204);
    expect((await setup(old).expect(401)).body.code).toBe('auth/invalid_token');
    await bearerPost(w.t, '/v1/auth/mfa/totp/verify-setup', old, { code: '123456' }).expect(401);
    // the owner, signing in with the new password, gets an enrollment token of their own
    await setup(await enrollment(NEW_PASSWORD)).expect(200);
  });

  it('an owner kept out of new addresses by an attack on the account gets in from the address they reset the password from', async () => {
    const u = await register(w.t, tenant.apiKey);
    // a distributed attack trips the account-wide limit (50 failures a window, one per address)
    for (let i = 0; i < 50; i++) await post(w.t, '/v1/auth/login', tenant.apiKey, { email: u.email, password: 'wrong password 123' }).expect(401);
    const here = randomIp();
    expect((await post(w.t, '/v1/auth/login', tenant.apiKey, { email: u.email, password: STRONG_PASSWORD }, here).expect(429)).body.code).toBe('auth/login_throttled');
    await post(w.t, '/v1/auth/password/forgot', tenant.apiKey, { email: u.email }, here).expect(202);
    const token = linkToken(await resetMail(u.email), '/reset-password');
    await post(w.t, '/v1/auth/password/reset', tenant.apiKey, { token, password: NEW_PASSWORD }, here).expect(204);
    // the reset proved the mailbox from here: this address is known to the account now
    await post(w.t, '/v1/auth/login', tenant.apiKey, { email: u.email, password: NEW_PASSWORD }, here).expect(200);
    // other new addresses stay held until the window ends
    await post(w.t, '/v1/auth/login', tenant.apiKey, { email: u.email, password: NEW_PASSWORD }).expect(429);
  });

  it.each([
    ['token missing', { password: NEW_PASSWORD }, 'token'],
    ['token empty', { token: '', password: NEW_PASSWORD }, 'token'],
    ['password missing', { token: 'x' }, 'password'],
    ['password of 11 characters', { token: 'x', password: 'p'.repeat(11) }, 'password'],
    ['password of 129 characters', { token: 'x', password: 'p'.repeat(129) }, 'password'],
    ['password not a string', { token: 'x', password: 123456789012 }, 'password'],
    ['unknown property', { token: 'x', password: NEW_PASSWORD, email: 'a@b.c' }, 'email'],
  ])('reset rejects %s with 400 request/invalid', async (_n, body, field) => {
    const res = await post(w.t, '/v1/auth/password/reset', tenant.apiKey, body).expect(400);
    expect(res.body.code).toBe('request/invalid');
    expect(res.body.errors.map((e: { field: string }) => e.field)).toContain(field);
  });

  it('reset accepts passwords of exactly 12 and 128 characters', async () => {
    const u = await register(w.t, tenant.apiKey);
    await reset(await resetToken(u.email), 'p'.repeat(12)).expect(204);
    await reset(await resetToken(u.email), 'q'.repeat(128)).expect(204);
    await login(w.t, tenant.apiKey, u.email, 'q'.repeat(128));
  });

  it.each([
    ['email missing', {}],
    ['email malformed', { email: 'nope' }],
    ['unknown property', { email: 'a@example.com', redirect: 'x' }],
  ])('forgot rejects %s with 400 request/invalid', async (_n, body) => {
    expect((await post(w.t, '/v1/auth/password/forgot', tenant.apiKey, body).expect(400)).body.code).toBe('request/invalid');
  });

  it('forgot is limited per address (known or unknown alike) and per client address', async () => {
    const low = await w.extraApp({ RATE_LIMIT_EMAIL_PER_ADDRESS: '2', RATE_LIMIT_EMAIL_PER_IP: '4' });
    const send = (email: string, ip = randomIp()) => post(low, '/v1/auth/password/forgot', tenant.apiKey, { email }, ip);
    for (const email of [(await register(w.t, tenant.apiKey)).email, uniqueEmail('nobody')]) {
      await send(email).expect(202);
      await send(email).expect(202);
      const r = await send(email).expect(429);
      expect(Number(r.headers['retry-after'])).toBeGreaterThan(0);
      expect(r.body.code).toBe('rate_limit/exceeded');
    }
    const ip = randomIp();
    for (let i = 0; i < 4; i++) await send(uniqueEmail('spray'), ip).expect(202);
    expect((await send(uniqueEmail('spray'), ip).expect(429)).headers['retry-after']).toBeTruthy();
  });

  it('a client its own limit refuses uses up no recipient\'s quota and leaves no counter for it (end-user and dashboard resets)', async () => {
    const low = await w.extraApp({ RATE_LIMIT_EMAIL_PER_ADDRESS: '2', RATE_LIMIT_EMAIL_PER_IP: '3' });
    const redis = low.app.get<Redis>(REDIS);
    const victim = await register(w.t, tenant.apiKey);
    const owner = await signupTenant(low);
    const flows = [
      { bucket: 'mail-forgot', send: (email: string, ip: string) => post(low, '/v1/auth/password/forgot', tenant.apiKey, { email }, ip), victim: victim.email },
      { bucket: 'mail-dashboard-forgot', send: (email: string, ip: string) => low.http().post('/v1/auth/dashboard/password/forgot').set('X-Forwarded-For', ip).send({ email }), victim: owner.email },
    ];
    for (const f of flows) {
      const attacker = randomIp();
      for (let i = 0; i < 3; i++) await f.send(uniqueEmail('own'), attacker).expect(202);
      const counters = async () => (await redis.keys(`${process.env.REDIS_KEY_PREFIX}*:${f.bucket}}:hits`)).length;
      const before = await counters();
      // refused by its own limit, each naming the victim or a new address
      for (let i = 0; i < 3; i++) await f.send(f.victim, attacker).expect(429);
      for (let i = 0; i < 5; i++) await f.send(uniqueEmail('spray'), attacker).expect(429);
      expect([f.bucket, await counters()]).toEqual([f.bucket, before]);
      // the victim's own requests from elsewhere: the whole per-address allowance (2)
      await f.send(f.victim, randomIp()).expect(202);
      await f.send(f.victim, randomIp()).expect(202);
      await f.send(f.victim, randomIp()).expect(429);
    }
  });

  describe('change (bearer)', () => {
    it('needs the current password; ends the other sessions but not this one; mails the user', async () => {
      const u = await register(w.t, tenant.apiKey);
      const otherSession = await login(w.t, tenant.apiKey, u.email);
      await change(u.access, { current_password: STRONG_PASSWORD, new_password: NEW_PASSWORD }).expect(204);
      await w.t.http().get('/v1/auth/me').set('Authorization', `Bearer ${u.access}`).expect(200);
      await post(w.t, '/v1/auth/refresh', tenant.apiKey, { refresh_token: u.refresh }).expect(200);
      await w.t.http().get('/v1/auth/me').set('Authorization', `Bearer ${otherSession.access}`).expect(401);
      await post(w.t, '/v1/auth/refresh', tenant.apiKey, { refresh_token: otherSession.refresh }).expect(401);
      await post(w.t, '/v1/auth/login', tenant.apiKey, { email: u.email, password: STRONG_PASSWORD }).expect(401);
      await login(w.t, tenant.apiKey, u.email, NEW_PASSWORD);
      const mail = await changedMail(u.email);
      expect(mail.subject).toBe(`Your ${tenant.name} password was changed`);
    });

    it('a wrong current password is 401 and throttled (429 + Retry-After) like sign-in failures', async () => {
      const u = await register(w.t, tenant.apiKey);
      const ip = randomIp();
      for (let i = 0; i < 5; i++) {
        const r = await change(u.access, { current_password: 'wrong password here', new_password: NEW_PASSWORD }, ip).expect(401);
        expect(r.body.code).toBe('auth/invalid_credentials');
      }
      const limited = await change(u.access, { current_password: STRONG_PASSWORD, new_password: NEW_PASSWORD }, ip).expect(429);
      expect(limited.body.code).toBe('auth/login_throttled');
      expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
      await login(w.t, tenant.apiKey, u.email); // still the old password
    });

    it('an outstanding reset link, magic link and email sign-in code stop working after a change', async () => {
      const u = await register(w.t, tenant.apiKey);
      const token = await resetToken(u.email);
      await post(w.t, '/v1/auth/magic-link', tenant.apiKey, { email: u.email }).expect(202);
      const magic = linkToken(await w.nextMail((m) => m.to.includes(u.email) && m.subject.startsWith('Your sign-in link')), '/magic-link');
      await post(w.t, '/v1/auth/email-otp', tenant.apiKey, { email: u.email }).expect(202);
      const code = mailCode(await w.nextMail((m) => m.to.includes(u.email) && m.subject.endsWith('verification code')));
      await change(u.access, { current_password: STRONG_PASSWORD, new_password: NEW_PASSWORD }).expect(204);
      expect((await reset(token, 'attacker password 1').expect(400)).body.code).toBe('token/invalid');
      expect((await post(w.t, '/v1/auth/magic-link/verify', tenant.apiKey, { token: magic }).expect(400)).body.code).toBe('token/invalid');
      await post(w.t, '/v1/auth/email-otp/verify', tenant.apiKey, { email: u.email, code }).expect(401);
      // asked for after the change, they sign in
      await post(w.t, '/v1/auth/magic-link', tenant.apiKey, { email: u.email }).expect(202);
      const fresh = linkToken(await w.nextMail((m) => m.to.includes(u.email) && m.subject.startsWith('Your sign-in link')), '/magic-link');
      await post(w.t, '/v1/auth/magic-link/verify', tenant.apiKey, { token: fresh }).expect(200);
    });

    it.each([
      ['current_password missing', { new_password: NEW_PASSWORD }, 'current_password'],
      ['current_password empty', { current_password: '', new_password: NEW_PASSWORD }, 'current_password'],
      ['new_password missing', { current_password: STRONG_PASSWORD }, 'new_password'],
      ['new_password of 11 characters', { current_password: STRONG_PASSWORD, new_password: 'x'.repeat(11) }, 'new_password'],
      ['new_password of 129 characters', { current_password: STRONG_PASSWORD, new_password: 'x'.repeat(129) }, 'new_password'],
      ['unknown property', { current_password: STRONG_PASSWORD, new_password: NEW_PASSWORD, user_id: 'x' }, 'user_id'],
    ])('rejects %s with 400 request/invalid', async (_n, body, field) => {
      const u = await register(w.t, tenant.apiKey);
      const res = await change(u.access, body).expect(400);
      expect(res.body.code).toBe('request/invalid');
      expect(res.body.errors.map((e: { field: string }) => e.field)).toContain(field);
    });

    it('needs a bearer; a guest cannot change a password', async () => {
      await post(w.t, '/v1/auth/password/change', tenant.apiKey, { current_password: 'x', new_password: NEW_PASSWORD }).expect(401);
      await w.t.db.query(`UPDATE tenants SET anonymous_signins_enabled = true, anonymous_ever_enabled = true, default_user_role = 'read_only' WHERE id = $1`, [tenant.tenantId]);
      await w.t.tenantChanged(tenant.tenantId);
      const guest = await post(w.t, '/v1/auth/anonymous', tenant.apiKey, {}).expect(201);
      expect((await change(guest.body.access_token, { current_password: 'x', new_password: NEW_PASSWORD }).expect(403)).body.code).toBe('auth/forbidden');
    });
  });
});
