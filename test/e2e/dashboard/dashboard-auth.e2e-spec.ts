import { randomUUID } from 'crypto';
import * as argon2 from 'argon2';
import { createTestApp, randomIp, STRONG_PASSWORD, TestApp, uniqueEmail } from '../../setup/app';
import { createApiKey, DashboardFixture, sessionCookie, signupTenant } from '../../factories/dashboard.factory';
import { createTenant } from '../../factories/tenant.factory';

describe('dashboard auth (spec 2.7, contract "Onboarding and the dashboard")', () => {
  let t: TestApp;
  let owner: DashboardFixture;
  beforeAll(async () => {
    t = await createTestApp();
    owner = await signupTenant(t);
  });
  afterAll(() => t.close());

  const login = (email: string, password: string, ip = randomIp()) =>
    t.http().post('/v1/auth/dashboard/login').set('X-Forwarded-For', ip).send({ email, password });

  it('signs in with email and password: session cookie, memberships, csrf token', async () => {
    const res = await login(owner.email.toUpperCase(), owner.password).expect(200);
    expect(res.body).toEqual({
      user: { id: owner.userId, email: owner.email },
      memberships: [{ tenant_id: owner.tenantId, tenant_slug: owner.slug, role: 'owner' }],
      csrf_token: expect.any(String),
    });
    const cookie = sessionCookie(res.headers['set-cookie']);
    const me = await t.http().get('/v1/auth/dashboard/me').set('Cookie', cookie).expect(200);
    expect(me.body.csrf_token).toBe(res.body.csrf_token);
    // the session is stored hashed: the cookie value is not in the table
    const raw = cookie.split('=')[1];
    expect(await t.db.query(`SELECT 1 FROM dashboard_sessions WHERE token_hash = $1`, [raw])).toHaveLength(0);
  });

  it('moves a hash made with older argon2id parameters to the configured ones at the next successful login', async () => {
    const member = await signupTenant(t);
    const old = await argon2.hash(member.password, { type: argon2.argon2id, memoryCost: 2048, timeCost: 2, parallelism: 1 });
    await t.db.query(`UPDATE dashboard_users SET password_hash = $2 WHERE id = $1`, [member.userId, old]);
    await login(member.email, member.password).expect(200);
    const [row] = await t.db.query<{ password_hash: string }>(`SELECT password_hash FROM dashboard_users WHERE id = $1`, [member.userId]);
    expect(row.password_hash).toMatch(/^\$argon2id\$v=19\$m=1024,p=1,t=1\$/);
    await login(member.email, member.password).expect(200);
  });

  it.each([
    ['email malformed', { email: 'nope', password: 'whatever123' }, 'email'],
    ['password shorter than 8', { email: 'a@b.co', password: 'short7!' }, 'password'],
    ['password longer than 128', { email: 'a@b.co', password: 'x'.repeat(129) }, 'password'],
    ['password missing', { email: 'a@b.co' }, 'password'],
    ['extra property', { email: 'a@b.co', password: 'whatever123', remember: true }, 'remember'],
  ])('login rejects %s with 400 request/invalid', async (_n, body, field) => {
    const res = await t.http().post('/v1/auth/dashboard/login').send(body).expect(400);
    expect(res.body.code).toBe('request/invalid');
    expect(res.body.errors.map((e: { field: string }) => e.field)).toContain(field);
  });

  it('answers a wrong password and an unknown email with the same 401', async () => {
    const a = await login(owner.email, 'wrong-password-1').expect(401);
    const b = await login(uniqueEmail('nobody'), 'wrong-password-1').expect(401);
    const strip = (x: Record<string, unknown>) => ({ ...x, request_id: undefined });
    expect(strip(a.body)).toEqual(strip(b.body));
    expect(a.body.code).toBe('auth/invalid_credentials');
  });

  it('requires the session for me, and ends it server-side on logout', async () => {
    await t.http().get('/v1/auth/dashboard/me').expect(401);
    await t.http().get('/v1/auth/dashboard/me').set('Cookie', 'authp_dashboard=forged').expect(401);
    const res = await login(owner.email, owner.password).expect(200);
    const cookie = sessionCookie(res.headers['set-cookie']);
    await t.http().post('/v1/auth/dashboard/logout').set('Cookie', cookie).expect(403); // no CSRF header
    await t.http().post('/v1/auth/dashboard/logout').set('Cookie', cookie).set('X-CSRF-Token', res.body.csrf_token).expect(204);
    await t.http().get('/v1/auth/dashboard/me').set('Cookie', cookie).expect(401);
  });

  it('refuses state-changing requests without the right X-CSRF-Token (403 csrf/invalid)', async () => {
    const url = `/v1/auth/dashboard/tenants/${owner.slug}/api-keys`;
    const none = await t.http().post(url).set('Cookie', owner.cookie).send({ name: 'k' }).expect(403);
    expect(none.body.code).toBe('csrf/invalid');
    const wrong = await t.http().post(url).set('Cookie', owner.cookie).set('X-CSRF-Token', 'nope').send({ name: 'k' }).expect(403);
    expect(wrong.body.code).toBe('csrf/invalid');
    // another session's token does not work either
    const other = await login(owner.email, owner.password).expect(200);
    await t.http().post(url).set('Cookie', owner.cookie).set('X-CSRF-Token', other.body.csrf_token).send({ name: 'k' }).expect(403);
    await t.http().post(url).set('Cookie', owner.cookie).set('X-CSRF-Token', owner.csrf).send({ name: 'k' }).expect(201);
  });

  it('re-authenticates with the password (verified_at) and refuses a wrong one', async () => {
    const ok = await t.http().post('/v1/auth/dashboard/reauth').set('Cookie', owner.cookie).set('X-CSRF-Token', owner.csrf).send({ password: owner.password }).expect(200);
    expect(new Date(ok.body.verified_at).getTime()).toBeGreaterThan(Date.now() - 60_000);
    const bad = await t.http().post('/v1/auth/dashboard/reauth').set('Cookie', owner.cookie).set('X-CSRF-Token', owner.csrf).send({ password: 'wrong-password' }).expect(401);
    expect(bad.body.code).toBe('auth/invalid_credentials');
    await t.http().post('/v1/auth/dashboard/reauth').set('Cookie', owner.cookie).set('X-CSRF-Token', owner.csrf).send({ password: 'short' }).expect(400);
  });

  it('invites a member who accepts; members read but cannot write; the invite is single-use and mailed', async () => {
    const email = uniqueEmail('member');
    const inv = await t
      .http()
      .post(`/v1/auth/dashboard/tenants/${owner.slug}/members`)
      .set('Cookie', owner.cookie)
      .set('X-CSRF-Token', owner.csrf)
      .send({ email, role: 'member' })
      .expect(201);
    expect(inv.body.invite_token).toEqual(expect.any(String));
    const mails = await t.db.query<{ payload: { to: string; template: string }; secret_enc: string }>(
      `SELECT payload, secret_enc FROM outbox WHERE topic = 'email' AND payload->>'to' = $1`,
      [email],
    );
    expect(mails).toHaveLength(1);
    expect(mails[0].payload.template).toBe('dashboard_invite');
    expect(mails[0].secret_enc).not.toContain(inv.body.invite_token);
    expect(JSON.stringify(mails[0].payload)).not.toContain(inv.body.invite_token);

    await t.http().post('/v1/auth/dashboard/invites/accept').send({ token: inv.body.invite_token, password: 'short-pw1' }).expect(400);
    // characters, not UTF-16 units: eight emoji are eight characters, too short for a new account
    const emoji = await t.http().post('/v1/auth/dashboard/invites/accept').send({ token: inv.body.invite_token, password: '\u{1F600}'.repeat(8) }).expect(400);
    expect(emoji.body).toMatchObject({ code: 'request/invalid', detail: 'One or more fields are invalid', errors: [{ field: 'password' }] });
    // counted in the NFKC form that is hashed: twelve code points of six decomposed letters are six
    const decomposed = await t.http().post('/v1/auth/dashboard/invites/accept').send({ token: inv.body.invite_token, password: 'e\u0301'.repeat(6) }).expect(400);
    expect(decomposed.body).toMatchObject({ code: 'request/invalid', errors: [{ field: 'password' }] });
    const acc = await t.http().post('/v1/auth/dashboard/invites/accept').send({ token: inv.body.invite_token, password: STRONG_PASSWORD }).expect(200);
    expect(acc.body.memberships).toEqual([{ tenant_id: owner.tenantId, tenant_slug: owner.slug, role: 'member' }]);
    // the accept request asks for no consent, so none is recorded as given (signup's are)
    const [consents] = await t.db.query<{ terms: Date | null; privacy: Date | null }>(
      `SELECT terms_accepted_at AS terms, privacy_accepted_at AS privacy FROM dashboard_users WHERE id = $1`,
      [acc.body.user.id],
    );
    expect(consents).toEqual({ terms: null, privacy: null });
    const again = await t.http().post('/v1/auth/dashboard/invites/accept').send({ token: inv.body.invite_token, password: STRONG_PASSWORD }).expect(400);
    expect(again.body.code).toBe('invite/invalid');

    const cookie = sessionCookie(acc.headers['set-cookie']);
    const csrf = acc.body.csrf_token;
    await t.http().get(`/v1/auth/dashboard/tenants/${owner.slug}/api-keys`).set('Cookie', cookie).expect(200);
    const denied = await t.http().post(`/v1/auth/dashboard/tenants/${owner.slug}/api-keys`).set('Cookie', cookie).set('X-CSRF-Token', csrf).send({ name: 'x' }).expect(403);
    expect(denied.body.code).toBe('auth/forbidden');
    const denied2 = await t.http().post(`/v1/auth/dashboard/tenants/${owner.slug}/members`).set('Cookie', cookie).set('X-CSRF-Token', csrf).send({ email: uniqueEmail(), role: 'owner' }).expect(403);
    expect(denied2.body.code).toBe('auth/forbidden');

    const dup = await t.http().post(`/v1/auth/dashboard/tenants/${owner.slug}/members`).set('Cookie', owner.cookie).set('X-CSRF-Token', owner.csrf).send({ email, role: 'member' }).expect(409);
    expect(dup.body.code).toBe('member/exists');
  });

  it('lets an existing dashboard user accept an invite to a second tenant with their own password', async () => {
    const other = await signupTenant(t);
    const inv = await t.http().post(`/v1/auth/dashboard/tenants/${other.slug}/members`).set('Cookie', other.cookie).set('X-CSRF-Token', other.csrf).send({ email: owner.email, role: 'owner' }).expect(201);
    await t.http().post('/v1/auth/dashboard/invites/accept').send({ token: inv.body.invite_token, password: 'not-the-password' }).expect(401);
    const acc = await t.http().post('/v1/auth/dashboard/invites/accept').send({ token: inv.body.invite_token, password: owner.password }).expect(200);
    expect(acc.body.memberships.map((m: { tenant_slug: string }) => m.tenant_slug).sort()).toEqual([owner.slug, other.slug].sort());
  });

  it('invitations of two tenants for one new address, accepted at once with one password: both join the one new account', async () => {
    const other = await signupTenant(t);
    for (let round = 0; round < 3; round++) {
      const email = uniqueEmail('race');
      const tokens = [];
      for (const d of [owner, other]) {
        const inv = await t.http().post(`/v1/auth/dashboard/tenants/${d.slug}/members`).set('Cookie', d.cookie).set('X-CSRF-Token', d.csrf).send({ email, role: 'member' }).expect(201);
        tokens.push(inv.body.invite_token as string);
      }
      const answers = await Promise.all(tokens.map((token) => t.http().post('/v1/auth/dashboard/invites/accept').set('X-Forwarded-For', randomIp()).send({ token, password: STRONG_PASSWORD })));
      expect(answers.map((a) => a.status)).toEqual([200, 200]);
      expect(new Set(answers.map((a) => a.body.user.id)).size).toBe(1);
      expect(await t.db.query(`SELECT 1 FROM dashboard_users WHERE email_normalized = $1`, [email])).toHaveLength(1);
      const slugs = (await t.http().get('/v1/auth/dashboard/me').set('Cookie', sessionCookie(answers[1].headers['set-cookie'])).expect(200)).body.memberships.map((m: { tenant_slug: string }) => m.tenant_slug);
      expect(slugs.sort()).toEqual([owner.slug, other.slug].sort());
    }
  });

  it('the right password on an invitation that then fails (a member already) is not left counted as a failed sign-in', async () => {
    const account = await signupTenant(t);
    const inv = await t.http().post(`/v1/auth/dashboard/tenants/${owner.slug}/members`).set('Cookie', owner.cookie).set('X-CSRF-Token', owner.csrf).send({ email: account.email, role: 'member' }).expect(201);
    // a member meanwhile (by SQL here: with one pending invitation per address, only a race gets
    // an account into the tenant between its invitation and the acceptance)
    await t.db.query(`INSERT INTO tenant_members (tenant_id, user_id, role) VALUES ($1, $2, 'member')`, [owner.tenantId, account.userId]);
    const ip = randomIp();
    for (let i = 0; i < 7; i++) {
      const res = await t.http().post('/v1/auth/dashboard/invites/accept').set('X-Forwarded-For', ip).send({ token: inv.body.invite_token, password: account.password }).expect(409);
      expect(res.body.code).toBe('member/exists');
    }
    await t.http().post('/v1/auth/dashboard/login').set('X-Forwarded-For', ip).send({ email: account.email, password: account.password }).expect(200);
  });

  it('an invitation never changes the role of a member: inviting one is 409 member/exists, the role stays', async () => {
    const email = uniqueEmail('twice');
    const invite = (role: string) => t.http().post(`/v1/auth/dashboard/tenants/${owner.slug}/members`).set('Cookie', owner.cookie).set('X-CSRF-Token', owner.csrf).send({ email, role });
    const asMember = await invite('member').expect(201);
    const first = await t.http().post('/v1/auth/dashboard/invites/accept').send({ token: asMember.body.invite_token, password: STRONG_PASSWORD }).expect(200);
    expect(first.body.memberships).toEqual([{ tenant_id: owner.tenantId, tenant_slug: owner.slug, role: 'member' }]);
    expect((await invite('owner').expect(409)).body.code).toBe('member/exists');
    const invites = await t.db.query<{ role: string; used: boolean }>(`SELECT role, accepted_at IS NOT NULL AS used FROM dashboard_invites WHERE email_normalized = $1`, [email]);
    expect(invites).toEqual([{ role: 'member', used: true }]);
    const me = await t.http().get('/v1/auth/dashboard/me').set('Cookie', sessionCookie(first.headers['set-cookie'])).expect(200);
    expect(me.body.memberships).toEqual([{ tenant_id: owner.tenantId, tenant_slug: owner.slug, role: 'member' }]);
  });

  it("an existing account accepting an invitation answers the account's email, not the invitation's spelling of it", async () => {
    const other = await signupTenant(t);
    const spelled = owner.email.toUpperCase();
    const inv = await t.http().post(`/v1/auth/dashboard/tenants/${other.slug}/members`).set('Cookie', other.cookie).set('X-CSRF-Token', other.csrf).send({ email: spelled, role: 'member' }).expect(201);
    const acc = await t.http().post('/v1/auth/dashboard/invites/accept').send({ token: inv.body.invite_token, password: owner.password }).expect(200);
    expect(acc.body.user.email).toBe(owner.email);
    expect(acc.body.user.email).not.toBe(spelled);
  });

  it('rejects invite bodies that break the constraints', async () => {
    const url = `/v1/auth/dashboard/tenants/${owner.slug}/members`;
    const send = (body: object) => t.http().post(url).set('Cookie', owner.cookie).set('X-CSRF-Token', owner.csrf).send(body);
    expect((await send({ email: uniqueEmail(), role: 'admin' }).expect(400)).body.code).toBe('request/invalid');
    expect((await send({ email: 'bad', role: 'member' }).expect(400)).body.code).toBe('request/invalid');
    expect((await send({ email: uniqueEmail(), role: 'member', extra: 1 }).expect(400)).body.code).toBe('request/invalid');
  });

  it("answers 404 for another tenant's slug (no membership), same as an unknown slug", async () => {
    const other = await signupTenant(t);
    const a = await t.http().get(`/v1/auth/dashboard/tenants/${other.slug}/api-keys`).set('Cookie', owner.cookie).expect(404);
    const b = await t.http().get(`/v1/auth/dashboard/tenants/no-such-tenant/api-keys`).set('Cookie', owner.cookie).expect(404);
    expect(a.body.code).toBe(b.body.code);
    await createApiKey(t, other);
  });

  it('throttles failed logins per account and address, without locking the owner out from elsewhere', async () => {
    const victim = await signupTenant(t);
    const attacker = randomIp();
    for (let i = 0; i < 5; i++) await login(victim.email, 'wrong-password-x', attacker).expect(401);
    const blocked = await login(victim.email, victim.password, attacker).expect(429);
    expect(blocked.body.code).toBe('auth/login_throttled');
    expect(Number(blocked.headers['retry-after'])).toBeGreaterThan(0);
    expect(blocked.headers['x-service-docs']).toBeTruthy();
    // the owner, from their own address, still signs in
    await login(victim.email, victim.password, randomIp()).expect(200);
  });

  it('a parallel burst from one address has at most 5 passwords checked; the right one sent after is refused too', async () => {
    const victim = await signupTenant(t);
    const attacker = randomIp();
    const burst = await Promise.all(Array.from({ length: 25 }, () => login(victim.email, 'wrong-password-x', attacker)));
    expect(burst.filter((r) => r.status === 401)).toHaveLength(5);
    expect(burst.filter((r) => r.status === 429)).toHaveLength(20);
    await login(victim.email, victim.password, attacker).expect(429);
  });
});

describe('dashboard sessions: timeouts and the per-account limit', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp({ LOGIN_FAILURES_PER_ACCOUNT: '6', LOGIN_FAILURES_PER_ACCOUNT_IP: '3' });
  });
  afterAll(() => t.close());

  it('dashboard sign-ins are limited per client address, successful ones included (RATE_LIMIT_LOGIN_PER_IP_PER_MIN, apart from end users\' sign-ins)', async () => {
    const d = await signupTenant(t);
    const ip = randomIp();
    const sessions = async () => Number((await t.db.query(`SELECT count(*) AS n FROM dashboard_sessions WHERE user_id = $1`, [d.userId]))[0].n);
    const before = await sessions();
    const login = (email: string, password: string, from: string) => t.http().post('/v1/auth/dashboard/login').set('X-Forwarded-For', from).send({ email, password });
    // one after another (a parallel burst meets the failure throttle's pending rule first)
    for (let i = 0; i < 60; i++) await login(d.email, d.password, ip).expect(200);
    const res = await login(d.email, d.password, ip).expect(429);
    expect([res.body.code, Number(res.headers['retry-after']) > 0]).toEqual(['rate_limit/exceeded', true]);
    expect(await sessions()).toBe(before + 60);
    await login(d.email, d.password, randomIp()).expect(200);
    // an end user's sign-in from the same address counts apart
    const tenant = await createTenant(t.db);
    const email = uniqueEmail('apart');
    await t.http().post('/v1/auth/register').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', randomIp()).send({ email, password: STRONG_PASSWORD, consent: true }).expect(201);
    await t.http().post('/v1/auth/login').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', ip).send({ email, password: STRONG_PASSWORD }).expect(200);
  });

  it('ends a session after the idle timeout and after the absolute timeout', async () => {
    const a = await signupTenant(t);
    await t.db.query(`UPDATE dashboard_sessions SET last_seen_at = now() - interval '2 hours' WHERE user_id = $1`, [a.userId]);
    await t.http().get('/v1/auth/dashboard/me').set('Cookie', a.cookie).expect(401);
    const b = await signupTenant(t);
    await t.db.query(`UPDATE dashboard_sessions SET absolute_expires_at = now() - interval '1 second' WHERE user_id = $1`, [b.userId]);
    await t.http().get('/v1/auth/dashboard/me').set('Cookie', b.cookie).expect(401);
  });

  it('a distributed attack trips the per-account limit for new addresses only; known addresses still sign in', async () => {
    const victim = await signupTenant(t);
    const home = randomIp();
    await t.http().post('/v1/auth/dashboard/login').set('X-Forwarded-For', home).send({ email: victim.email, password: victim.password }).expect(200);
    for (let i = 0; i < 6; i++)
      await t.http().post('/v1/auth/dashboard/login').set('X-Forwarded-For', randomIp()).send({ email: victim.email, password: 'wrong-password-y' }).expect(401);
    const fresh = await t.http().post('/v1/auth/dashboard/login').set('X-Forwarded-For', randomIp()).send({ email: victim.email, password: 'wrong-password-y' }).expect(429);
    expect(fresh.body.code).toBe('auth/login_throttled');
    await t.http().post('/v1/auth/dashboard/login').set('X-Forwarded-For', home).send({ email: victim.email, password: victim.password }).expect(200);
  });
  // Signing up, accepting an invitation and registering each sign the account in with its password
  // from that address: the address is known at once, so a distributed attack on a brand-new account
  // (the per-account limit is 6 here) cannot lock its owner out of the address they started from.
  const failFromEverywhere = async (path: string, email: string, headers: Record<string, string> = {}) => {
    for (let i = 0; i < 6; i++) await t.http().post(path).set(headers).set('X-Forwarded-For', randomIp()).send({ email, password: 'wrong-password-y' }).expect(401);
    expect((await t.http().post(path).set(headers).set('X-Forwarded-For', randomIp()).send({ email, password: 'wrong-password-y' }).expect(429)).body.code).toBe('auth/login_throttled');
  };

  it('the address a tenant was signed up from is known: its owner still signs in there under a distributed attack', async () => {
    const home = randomIp();
    const email = uniqueEmail('newowner');
    await t.http().post('/v1/onboarding/signup').set('X-Forwarded-For', home).send({ email, password: STRONG_PASSWORD, tenant_name: `Fresh ${Date.now()}`, consent_terms: true, consent_privacy: true }).expect(201);
    await failFromEverywhere('/v1/auth/dashboard/login', email);
    await t.http().post('/v1/auth/dashboard/login').set('X-Forwarded-For', home).send({ email, password: STRONG_PASSWORD }).expect(200);
    // an address that never signed in stays blocked, even with the right password
    expect((await t.http().post('/v1/auth/dashboard/login').set('X-Forwarded-For', randomIp()).send({ email, password: STRONG_PASSWORD }).expect(429)).body.code).toBe('auth/login_throttled');
  });

  it('a honeypot signup replayed from many addresses makes none of them known for that email: once its owner signs up, they are held by the per-account limit like any other', async () => {
    const email = uniqueEmail('decoyed');
    const decoy = { email, password: 'a bot chose this one', tenant_name: `Bot ${Date.now()}`, consent_terms: true, consent_privacy: true, website: 'x', idempotency_key: randomUUID() };
    const botAddresses = [randomIp(), randomIp(), randomIp()];
    for (const ip of botAddresses) await t.http().post('/v1/onboarding/signup').set('X-Forwarded-For', ip).send(decoy).expect(201);
    const home = randomIp();
    await t.http().post('/v1/onboarding/signup').set('X-Forwarded-For', home).send({ email, password: STRONG_PASSWORD, tenant_name: `Real ${Date.now()}`, consent_terms: true, consent_privacy: true }).expect(201);
    await failFromEverywhere('/v1/auth/dashboard/login', email);
    for (const ip of botAddresses) {
      const res = await t.http().post('/v1/auth/dashboard/login').set('X-Forwarded-For', ip).send({ email, password: 'wrong-password-y' }).expect(429);
      expect(res.body.code).toBe('auth/login_throttled');
    }
    await t.http().post('/v1/auth/dashboard/login').set('X-Forwarded-For', home).send({ email, password: STRONG_PASSWORD }).expect(200);
  });

  it('the address an invitation was accepted from is known likewise', async () => {
    const owner = await signupTenant(t);
    const email = uniqueEmail('invitee');
    const inv = await t.http().post(`/v1/auth/dashboard/tenants/${owner.slug}/members`).set('Cookie', owner.cookie).set('X-CSRF-Token', owner.csrf).send({ email, role: 'member' }).expect(201);
    const home = randomIp();
    await t.http().post('/v1/auth/dashboard/invites/accept').set('X-Forwarded-For', home).send({ token: inv.body.invite_token, password: STRONG_PASSWORD }).expect(200);
    await failFromEverywhere('/v1/auth/dashboard/login', email);
    await t.http().post('/v1/auth/dashboard/login').set('X-Forwarded-For', home).send({ email, password: STRONG_PASSWORD }).expect(200);
  });

  it('the address an end user registered from (or claimed a guest from) is known likewise', async () => {
    const tenant = await createTenant(t.db, { anonymous_signins_enabled: true });
    const key = { 'X-API-Key': tenant.apiKey };
    const home = randomIp();
    const email = uniqueEmail('enduser');
    await t.http().post('/v1/auth/register').set(key).set('X-Forwarded-For', home).send({ email, password: STRONG_PASSWORD, consent: true }).expect(201);
    await failFromEverywhere('/v1/auth/login', email, key);
    await t.http().post('/v1/auth/login').set(key).set('X-Forwarded-For', home).send({ email, password: STRONG_PASSWORD }).expect(200);
    // a claimed guest: the address of the claim
    const g = await t.http().post('/v1/auth/anonymous').set(key).set('X-Forwarded-For', home).send({}).expect(201);
    const claimed = uniqueEmail('claimed');
    await t.http().post('/v1/auth/register').set(key).set('X-Forwarded-For', home).set('Authorization', `Bearer ${g.body.access_token}`).send({ email: claimed, password: STRONG_PASSWORD, consent: true }).expect(201);
    await failFromEverywhere('/v1/auth/login', claimed, key);
    await t.http().post('/v1/auth/login').set(key).set('X-Forwarded-For', home).send({ email: claimed, password: STRONG_PASSWORD }).expect(200);
  });
});

describe('dashboard: re-authentication for credential-minting actions, short idle timeouts', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp({ DASHBOARD_SESSION_IDLE_SECONDS: '60' });
  });
  afterAll(() => t.close());

  it('creating an API key, a member invite, an agent, an OAuth client, an agent secret or a webhook needs a sign-in or reauth within DASHBOARD_REAUTH_MAX_AGE_SECONDS', async () => {
    const d = await signupTenant(t);
    await t.db.query(`UPDATE tenants SET tier = 'pro' WHERE id = $1`, [d.tenantId]);
    await t.tenantChanged(d.tenantId);
    const as = (method: 'post', path: string, body: object) =>
      t.http()[method](`/v1/auth/dashboard/tenants/${d.slug}${path}`).set('Cookie', d.cookie).set('X-CSRF-Token', d.csrf).set('X-Forwarded-For', randomIp()).send(body);
    // just signed in: fresh enough
    await as('post', '/api-keys', { name: 'fresh' }).expect(201);
    // ten minutes later, without a reauth
    await t.db.query(`UPDATE dashboard_sessions SET created_at = now() - interval '10 minutes', reauth_at = NULL WHERE user_id = $1`, [d.userId]);
    const attempts: [string, object][] = [
      ['/api-keys', { name: 'late' }],
      ['/members', { email: uniqueEmail('invitee'), role: 'owner' }],
      ['/agents', { name: 'late agent', scopes: ['openid'] }],
      ['/webhooks', { url: 'http://127.0.0.1:9/hook', events: ['*'] }],
      ['/oauth-clients', { name: 'late client', client_type: 'confidential', grant_types: ['client_credentials'] }],
    ];
    for (const [path, body] of attempts) {
      const r = await as('post', path, body).expect(403);
      expect(r.body.code).toBe('auth/reauth_required');
    }
    expect(await t.db.query(`SELECT 1 FROM api_keys WHERE tenant_id = $1 AND name = 'late'`, [d.tenantId])).toHaveLength(0);
    // reading, revoking and the like stay possible
    await t.http().get(`/v1/auth/dashboard/tenants/${d.slug}/api-keys`).set('Cookie', d.cookie).expect(200);
    await t.http().post('/v1/auth/dashboard/reauth').set('Cookie', d.cookie).set('X-CSRF-Token', d.csrf).send({ password: d.password }).expect(200);
    for (const [path, body] of attempts) {
      const r = await as('post', path, body);
      expect([path, r.status, r.body.errors ?? r.body.code]).toEqual([path, 201, undefined]);
    }
    const [agent] = await t.db.query<{ id: string }>(`SELECT id FROM agent_clients WHERE tenant_id = $1`, [d.tenantId]);
    await t.db.query(`UPDATE dashboard_sessions SET reauth_at = now() - interval '10 minutes' WHERE user_id = $1`, [d.userId]);
    expect((await as('post', `/agents/${agent.id}/rotate-secret`, {}).expect(403)).body.code).toBe('auth/reauth_required');
    const [hook] = await t.db.query<{ id: string; secret_enc: string }>(`SELECT id, secret_enc FROM webhook_endpoints WHERE tenant_id = $1`, [d.tenantId]);
    expect((await as('post', `/webhooks/${hook.id}/rotate-secret`, {}).expect(403)).body.code).toBe('auth/reauth_required');
    expect(await t.db.query(`SELECT secret_enc FROM webhook_endpoints WHERE id = $1`, [hook.id])).toEqual([{ secret_enc: hook.secret_enc }]);
    // widening an agent or switching a disabled one back on, and switching a disabled webhook back
    // on, are no "reading or revoking" either: a stolen cookie cannot undo the tenant's disable
    await t.db.query(`UPDATE agent_clients SET disabled_at = now(), grant_types = '{}' WHERE id = $1`, [agent.id]);
    await t.db.query(`UPDATE webhook_endpoints SET disabled_at = now(), disabled_reason = 'repeated_failures' WHERE id = $1`, [hook.id]);
    const patched = await t.http().patch(`/v1/auth/dashboard/tenants/${d.slug}/agents/${agent.id}`).set('Cookie', d.cookie).set('X-CSRF-Token', d.csrf)
      .send({ scopes: ['openid', 'email', 'profile'], grant_types: ['urn:ietf:params:oauth:grant-type:token-exchange'] }).expect(403);
    expect(patched.body.code).toBe('auth/reauth_required');
    expect((await as('post', `/webhooks/${hook.id}/enable`, {}).expect(403)).body.code).toBe('auth/reauth_required');
    expect(await t.db.query(`SELECT a.disabled_at IS NOT NULL AS agent_off, w.disabled_at IS NOT NULL AS hook_off FROM agent_clients a, webhook_endpoints w WHERE a.id = $1 AND w.id = $2`, [agent.id, hook.id]))
      .toEqual([{ agent_off: true, hook_off: true }]);
  });

  it('changing security settings (MFA policy, email domains, passkey domain, guest settings) needs a recent sign-in or reauth too: a stolen session cannot weaken them', async () => {
    const d = await signupTenant(t);
    const write = (method: 'patch' | 'put', path: string, body: object) =>
      t.http()[method](`/v1/auth/dashboard/tenants/${d.slug}/settings/${path}`).set('Cookie', d.cookie).set('X-CSRF-Token', d.csrf).set('X-Forwarded-For', randomIp()).send(body);
    const changes: ['patch' | 'put', string, object][] = [
      ['patch', 'security', { mfa_policy: 'required' }],
      ['put', 'email-domains', { blocklist: ['spam.example'] }],
      ['put', 'passkey-domain', { passkey_rp_id: 'login.example.com' }],
      ['patch', 'anonymous', { anonymous_signins_enabled: true, default_user_role: 'read_only' }],
    ];
    await t.db.query(`UPDATE dashboard_sessions SET created_at = now() - interval '10 minutes', reauth_at = NULL WHERE user_id = $1`, [d.userId]);
    const before = await t.db.query(`SELECT mfa_policy, email_blocklist, passkey_rp_id, anonymous_signins_enabled FROM tenants WHERE id = $1`, [d.tenantId]);
    for (const [method, path, body] of changes) {
      const r = await write(method, path, body);
      expect([path, r.status, r.body.code]).toEqual([path, 403, 'auth/reauth_required']);
    }
    expect(await t.db.query(`SELECT mfa_policy, email_blocklist, passkey_rp_id, anonymous_signins_enabled FROM tenants WHERE id = $1`, [d.tenantId])).toEqual(before);
    // reading stays possible; after a reauth the changes go through
    await t.http().get(`/v1/auth/dashboard/tenants/${d.slug}/settings/security`).set('Cookie', d.cookie).expect(200);
    await t.http().post('/v1/auth/dashboard/reauth').set('Cookie', d.cookie).set('X-CSRF-Token', d.csrf).send({ password: d.password }).expect(200);
    for (const [method, path, body] of changes) expect([path, (await write(method, path, body)).status]).toEqual([path, 200]);
  });

  it('the session cookie is HttpOnly, SameSite=Lax and Secure outside development (contract)', async () => {
    const res = await t.http().post('/v1/onboarding/signup').set('X-Forwarded-For', randomIp())
      .send({ email: uniqueEmail('owner'), password: STRONG_PASSWORD, tenant_name: 'Cookie Flags', consent_terms: true, consent_privacy: true }).expect(201);
    const cookie = ([] as string[]).concat(res.headers['set-cookie'] ?? []).find((c) => c.startsWith('authp_dashboard='))!;
    expect(cookie).toMatch(/; HttpOnly/i);
    expect(cookie).toMatch(/; Secure/i);
    expect(cookie).toMatch(/; SameSite=Lax/i);
  });

  it('a 60 s idle timeout still slides: activity is recorded every 15 s at most', async () => {
    const d = await signupTenant(t);
    await t.db.query(`UPDATE dashboard_sessions SET last_seen_at = now() - interval '20 seconds' WHERE user_id = $1`, [d.userId]);
    await t.http().get('/v1/auth/dashboard/me').set('Cookie', d.cookie).expect(200);
    const [row] = await t.db.query<{ age: number }>(`SELECT extract(epoch FROM now() - last_seen_at) AS age FROM dashboard_sessions WHERE user_id = $1`, [d.userId]);
    expect(Number(row.age)).toBeLessThan(5);
  });
});
