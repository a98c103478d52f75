import { randomBytes } from 'crypto';
import { codeThrottleSubject } from '../../../src/modules/account-security/email-codes.service';
import { mfaThrottleRealm } from '../../../src/modules/mfa/mfa-throttle';
import { normalizeEmail } from '../../../src/modules/users/email';
import { AppError } from '../../../src/shared/errors/app-error';
import { LoginThrottleService, passwordSignInRealm } from '../../../src/shared/rate-limit/login-throttle.service';
import { createApiKey, DashboardFixture, signupTenant } from '../../factories/dashboard.factory';
import { createTestApp, randomIp, STRONG_PASSWORD, TestApp } from '../../setup/app';
import { addMember, agentToken, as, insertAction, rawRedis, registerAgent, tenantOnTier, throttleState as accountThrottle } from '../agents/agents.helpers';

interface Registered {
  id: string;
  email: string;
  access: string;
  refresh: string;
}

/**
 * Tenant administrators find and erase end users (GDPR Art. 17): GET .../users(?email=),
 * GET .../users/{userId} (members read), DELETE .../users/{userId} (owners, after a recent sign-in).
 */
describe('dashboard: end users (find, list, erase)', () => {
  let t: TestApp;
  beforeAll(async () => {
    // addMember accepts its invitations from one client address
    t = await createTestApp({ RATE_LIMIT_SIGNUP_PER_MIN: '25' });
  });
  afterAll(() => t.close());

  const url = (s: { slug: string }, rest = '') => `/v1/auth/dashboard/tenants/${s.slug}/users${rest}`;
  const keys = new Map<string, string>();
  const keyOf = async (d: DashboardFixture): Promise<string> => {
    if (!keys.has(d.slug)) keys.set(d.slug, (await createApiKey(t, d)).key);
    return keys.get(d.slug)!;
  };
  const tag = () => randomBytes(5).toString('hex');
  const register = async (d: DashboardFixture, email = `ada.${tag()}@example.com`, ip = randomIp()): Promise<Registered> => {
    const res = await t
      .http()
      .post('/v1/auth/register')
      .set('X-API-Key', await keyOf(d))
      .set('X-Forwarded-For', ip)
      .send({ email, password: STRONG_PASSWORD, consent: true })
      .expect(201);
    return { id: res.body.user.id, email: res.body.user.email, access: res.body.access_token, refresh: res.body.refresh_token };
  };
  const login = async (d: DashboardFixture, email: string, password = STRONG_PASSWORD) =>
    t.http().post('/v1/auth/login').set('X-API-Key', await keyOf(d)).set('X-Forwarded-For', randomIp()).send({ email, password });
  const refresh = async (d: DashboardFixture, token: string) =>
    t.http().post('/v1/auth/refresh').set('X-API-Key', await keyOf(d)).set('X-Forwarded-For', randomIp()).send({ refresh_token: token });
  const me = (access: string) => t.http().get('/v1/auth/me').set('Authorization', `Bearer ${access}`);
  const guest = async (d: DashboardFixture) => {
    await t.db.query(`UPDATE tenants SET anonymous_signins_enabled = true, anonymous_ever_enabled = true WHERE id = $1`, [d.tenantId]);
    await t.tenantChanged(d.tenantId);
    const res = await t.http().post('/v1/auth/anonymous').set('X-API-Key', await keyOf(d)).set('X-Forwarded-For', randomIp()).send({}).expect(201);
    return { id: res.body.user.id as string, access: res.body.access_token as string, refresh: res.body.refresh_token as string };
  };
  const deletedEvents = (tenantId: string, userId: string) =>
    t.db.query<{ actor_type: string; actor_id: string; target_type: string; severity: string; metadata: Record<string, unknown> }>(
      `SELECT actor_type, actor_id, target_type, severity, metadata FROM audit_events WHERE tenant_id = $1 AND type = 'user.deleted' AND target_id = $2`,
      [tenantId, userId],
    );
  const webhookEvents = (tenantId: string, userId: string) =>
    t.db.query<{ topic: string; payload: Record<string, unknown> }>(
      `SELECT topic, payload FROM outbox WHERE tenant_id = $1 AND event_type = 'user.deleted' AND payload->>'user_id' = $2`,
      [tenantId, userId],
    );
  /** Every (table, column) naming an end user's id: user_id and actor_user_id columns of the schema. */
  const userIdColumns = () =>
    t.db.query<{ table_name: string; column_name: string }>(
      `SELECT c.table_name, c.column_name FROM information_schema.columns c
         JOIN information_schema.tables tb ON tb.table_schema = c.table_schema AND tb.table_name = c.table_name AND tb.table_type = 'BASE TABLE'
        WHERE c.table_schema = current_schema() AND c.column_name IN ('user_id', 'actor_user_id') ORDER BY 1, 2`,
    );
  const rowsNaming = async (userId: string): Promise<Record<string, number>> => {
    const out: Record<string, number> = {};
    for (const c of await userIdColumns()) {
      const [{ n }] = await t.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM "${c.table_name}" WHERE "${c.column_name}"::text = $1`, [userId]);
      if (n) out[`${c.table_name}.${c.column_name}`] = n;
    }
    return out;
  };

  it('finds a user by email in any spelling the service takes for it; the answer has no secret or personal field beyond the listed ones', async () => {
    const owner = await signupTenant(t);
    const local = `ada.lovelace.${tag()}`;
    const ada = await register(owner, `Ada.${local}@Example.com`);
    const jose = await register(owner, `jos\u00e9.${local}@example.com`);
    await register(owner);
    const fullwidth = [...local].map((ch) => (/[a-z]/.test(ch) ? String.fromCharCode(ch.charCodeAt(0) - 0x61 + 0xff41) : ch)).join('');
    const found = async (spelling: string) => {
      const res = await as(t, owner).get(`${url(owner)}?email=${encodeURIComponent(spelling)}`).expect(200);
      expect(res.body.pagination).toEqual({ next_cursor: null, has_more: false });
      return res.body.data as Record<string, unknown>[];
    };
    for (const spelling of [`Ada.${local}@Example.com`, `ada.${local}@example.com`, `ADA.${local.toUpperCase()}@EXAMPLE.COM`, `  ada.${local}@example.com `, `\uff41\uff44\uff41.${fullwidth}@example.com`]) {
      const data = await found(spelling);
      // stored as typed (case kept), with exactly these fields (no password hash, date of birth, metadata)
      expect([spelling, data]).toEqual([spelling, [{ id: ada.id, email: `Ada.${local}@Example.com`, email_verified: false, is_anonymous: false, created_at: expect.any(String), last_sign_in_at: expect.any(String) }]]);
      expect(Object.keys(data[0]).sort()).toEqual(['created_at', 'email', 'email_verified', 'id', 'is_anonymous', 'last_sign_in_at']);
    }
    // canonical equivalents: a precomposed \u00e9 or e + combining accent, any case
    for (const spelling of [`jose\u0301.${local}@example.com`, `JOS\u00c9.${local}@EXAMPLE.com`]) {
      expect((await found(spelling)).map((u) => u.id)).toEqual([jose.id]);
    }
    // an unknown address, and one of another tenant: an empty page
    const other = await signupTenant(t);
    const stranger = await register(other);
    for (const email of [`nobody.${tag()}@example.com`, stranger.email]) expect(await found(email)).toEqual([]);
  });

  it('lists the tenant\'s users and guests newest first, cursor-paginated; members read; other tenants\' users never appear', async () => {
    const owner = await signupTenant(t);
    const member = await addMember(t, owner, 'member');
    const a = await register(owner);
    const g = await guest(owner);
    const b = await register(owner);
    await register(await signupTenant(t));
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const page: { body: { data: { id: string; is_anonymous: boolean; email: string | null }[]; pagination: { next_cursor: string | null; has_more: boolean } } } = await as(t, member)
        .get(`${url(owner)}?limit=1${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`)
        .expect(200);
      expect(page.body.data).toHaveLength(1);
      seen.push(page.body.data[0].id);
      cursor = page.body.pagination.next_cursor;
      expect(page.body.pagination.has_more).toBe(cursor !== null);
      pages++;
    } while (cursor && pages < 10);
    expect(seen).toEqual([b.id, g.id, a.id]);
    const all = await as(t, owner).get(url(owner)).expect(200);
    expect(all.body.data.map((u: { id: string }) => u.id)).toEqual([b.id, g.id, a.id]);
    expect(all.body.data[1]).toEqual({ id: g.id, email: null, email_verified: false, is_anonymous: true, created_at: expect.any(String), last_sign_in_at: expect.any(String) });
    expect((await as(t, member).get(url(owner, `/${a.id}`)).expect(200)).body).toEqual(expect.objectContaining({ id: a.id, email: a.email, is_anonymous: false }));
  });

  it('one user; unknown, malformed and another tenant\'s ids are the same 404 user/not_found (GET and DELETE); another tenant\'s slug is 404 tenant/not_found', async () => {
    const owner = await signupTenant(t);
    const other = await signupTenant(t);
    const theirs = await register(other);
    const ours = await register(owner);
    expect((await as(t, owner).get(url(owner, `/${ours.id.toUpperCase()}`)).expect(200)).body.id).toBe(ours.id);
    const bodies: unknown[] = [];
    for (const id of [theirs.id, '00000000-0000-4000-8000-000000000000', 'not-a-uuid', '1']) {
      const got = await as(t, owner).get(url(owner, `/${id}`)).expect(404);
      const del = await as(t, owner).delete(url(owner, `/${id}`)).expect(404);
      for (const res of [got, del]) {
        expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
        bodies.push({ ...res.body, request_id: 0 });
      }
    }
    expect(new Set(bodies.map((b) => JSON.stringify(b))).size).toBe(1);
    expect(bodies[0]).toEqual(expect.objectContaining({ status: 404, code: 'user/not_found' }));
    // the other tenant's user is untouched
    expect((await me(theirs.access).expect(200)).body.id).toBe(theirs.id);
    expect((await as(t, owner).get(url(other)).expect(404)).body.code).toBe('tenant/not_found');
    expect((await as(t, owner).delete(url(other, `/${theirs.id}`)).expect(404)).body.code).toBe('tenant/not_found');
  });

  it('every query constraint is a 400: unknown parameters, bad limits, blank or long emails (request/invalid); tampered or foreign cursors (request/invalid_cursor); a body on DELETE', async () => {
    const owner = await signupTenant(t);
    const u = await register(owner);
    await register(owner);
    for (const q of ['foo=1', 'limit=0', 'limit=101', 'limit=abc', 'limit=1.5', 'limit=-1', 'email=', 'email=%20%20', `email=${'a'.repeat(250)}%40example.com`, 'email=a%40x.com&email=b%40x.com', 'cursor=a&cursor=b']) {
      const res = await as(t, owner).get(`${url(owner)}?${q}`);
      expect([q, res.status, res.body.code]).toEqual([q, 400, 'request/invalid']);
      expect(res.body.errors?.length).toBeGreaterThan(0);
    }
    const first = await as(t, owner).get(`${url(owner)}?limit=1`).expect(200);
    const cursor: string = first.body.pagination.next_cursor;
    const other = await signupTenant(t);
    await register(other);
    await register(other);
    const foreign: string = (await as(t, other).get(`${url(other)}?limit=1`).expect(200)).body.pagination.next_cursor;
    for (const c of ['garbage', `${cursor}x`, `x${cursor}`, cursor.split('.')[0], foreign]) {
      const res = await as(t, owner).get(`${url(owner)}?cursor=${encodeURIComponent(c)}`);
      expect([c, res.status, res.body.code]).toEqual([c, 400, 'request/invalid_cursor']);
    }
    const withBody = await t.http().delete(url(owner, `/${u.id}`)).set('Cookie', owner.cookie).set('X-CSRF-Token', owner.csrf).send({ force: true });
    expect([withBody.status, withBody.body.code]).toEqual([400, 'request/invalid']);
    await as(t, owner).get(url(owner, `/${u.id}`)).expect(200);
  });

  it('only owners erase (a member: 403 auth/forbidden), after a recent sign-in (403 auth/reauth_required), with the CSRF token (403 csrf/invalid)', async () => {
    const owner = await signupTenant(t);
    const member = await addMember(t, owner, 'member');
    const u = await register(owner);
    expect((await as(t, member).delete(url(owner, `/${u.id}`)).expect(403)).body.code).toBe('auth/forbidden');
    expect((await t.http().delete(url(owner, `/${u.id}`)).set('Cookie', owner.cookie).expect(403)).body.code).toBe('csrf/invalid');
    expect((await t.http().delete(url(owner, `/${u.id}`)).expect(401)).body.code).toBe('auth/unauthorized');
    await t.db.query(`UPDATE dashboard_sessions SET created_at = created_at - interval '1 hour', reauth_at = NULL WHERE user_id = $1`, [owner.userId]);
    expect((await as(t, owner).delete(url(owner, `/${u.id}`)).expect(403)).body.code).toBe('auth/reauth_required');
    // reads need none
    await as(t, owner).get(url(owner, `/${u.id}`)).expect(200);
    expect(await deletedEvents(owner.tenantId, u.id)).toHaveLength(0);
    expect((await me(u.access).expect(200)).body.id).toBe(u.id);
    await t.http().post('/v1/auth/dashboard/reauth').set('Cookie', owner.cookie).set('X-CSRF-Token', owner.csrf).send({ password: owner.password }).expect(200);
    await as(t, owner).delete(url(owner, `/${u.id}`)).expect(204);
  });

  it('erases a user in one go: tokens refused at once, the old password is an unknown account, every row naming it is gone, the address can register anew; audited without the address; user.deleted webhook; a repeat is 404', async () => {
    const owner = await tenantOnTier(t, 'pro');
    const local = `grace.${tag()}`;
    const email = `${local}@example.com`;
    const u = await register(owner, email);
    const second = await login(owner, email);
    expect(second.status).toBe(200);
    const bystander = await register(owner);
    // state in every table that names a user: a pending MFA factor, an agent withdrawn by the
    // user, the user's agent activity, a sign-in code issued for the address before the account
    await t.http().post('/v1/auth/mfa/totp/setup').set('Authorization', `Bearer ${u.access}`).set('X-Forwarded-For', randomIp()).send({}).expect(200);
    const agent = await registerAgent(t, owner);
    await t.http().delete(`/v1/users/me/agents/${agent.id}`).set('Authorization', `Bearer ${u.access}`).expect(200);
    await insertAction(t, { tenantId: owner.tenantId, agentId: agent.id, actorUserId: u.id });
    const keptAction = await insertAction(t, { tenantId: owner.tenantId, agentId: agent.id, actorUserId: bystander.id });
    await t.db.query(
      `INSERT INTO email_otp_codes (tenant_id, purpose, email_normalized, user_id, mode, code_hash, salt, expires_at)
       VALUES ($1, 'login', $2, NULL, 'login_or_create', 'h', 's', now() + interval '10 minutes')`,
      [owner.tenantId, normalizeEmail(email)],
    );
    // the verification mails: one waiting for the relay, one relayed and not yet sent
    const mails = await t.db.query<{ id: string }>(`SELECT id::text AS id FROM outbox WHERE tenant_id = $1 AND topic = 'email' AND payload->>'to' = $2 ORDER BY id`, [owner.tenantId, email]);
    expect(mails.length).toBeGreaterThanOrEqual(1);
    await t.db.query(`INSERT INTO outbox (tenant_id, topic, event_type, payload, dispatched_at) VALUES ($1, 'email', 'email.password_changed', $2, now())`, [
      owner.tenantId,
      JSON.stringify({ to: email.toUpperCase(), template: 'password_changed', data: {} }),
    ]);
    const bystanderMails = await t.db.query(`SELECT 1 FROM outbox WHERE tenant_id = $1 AND topic = 'email' AND payload->>'to' = $2`, [owner.tenantId, bystander.email]);
    expect(bystanderMails.length).toBeGreaterThanOrEqual(1);
    // live in Redis: the session states and the profile are cached
    expect((await me(u.access).expect(200)).body.email).toBe(email);
    expect((await me(second.body.access_token).expect(200)).body.id).toBe(u.id);
    const [mauBefore] = await t.db.query<{ n: number }>(`SELECT active_users AS n FROM tenant_mau WHERE tenant_id = $1`, [owner.tenantId]);

    const before = await rowsNaming(u.id);
    for (const table of ['user_sessions.user_id', 'refresh_tokens.user_id', 'account_tokens.user_id', 'user_mfa_factors.user_id', 'agent_user_revocations.user_id', 'agent_actions.actor_user_id', 'tenant_mau_users.user_id']) {
      expect([table, (before[table] ?? 0) > 0]).toEqual([table, true]);
    }

    await as(t, owner).delete(url(owner, `/${u.id}`)).expect(204);

    // both sessions' access tokens at once, on /me and on routes that read no profile
    for (const access of [u.access, second.body.access_token]) {
      const res = await me(access).expect(401);
      expect(res.body.code).toBe('auth/invalid_token');
      expect((await t.http().get('/v1/users/me/agents').set('Authorization', `Bearer ${access}`).expect(401)).body.code).toBe('auth/invalid_token');
    }
    for (const token of [u.refresh, second.body.refresh_token]) {
      const r = await refresh(owner, token);
      expect([r.status, r.body.code]).toEqual([401, 'auth/invalid_refresh_token']);
    }
    const old = await login(owner, email);
    const unknown = await login(owner, `nobody.${tag()}@example.com`);
    expect(old.status).toBe(401);
    expect({ ...old.body, request_id: 0 }).toEqual({ ...unknown.body, request_id: 0 });

    expect(await rowsNaming(u.id)).toEqual({});
    expect(await t.db.query(`SELECT 1 FROM email_otp_codes WHERE tenant_id = $1 AND email_normalized = $2`, [owner.tenantId, normalizeEmail(email)])).toHaveLength(0);
    expect(await t.db.query(`SELECT 1 FROM outbox WHERE tenant_id = $1 AND topic = 'email' AND lower(payload->>'to') = lower($2)`, [owner.tenantId, email])).toHaveLength(0);
    expect(await t.db.query(`SELECT 1 FROM outbox WHERE tenant_id = $1 AND topic = 'email' AND payload->>'to' = $2`, [owner.tenantId, bystander.email])).toHaveLength(bystanderMails.length);
    expect(await t.db.query(`SELECT 1 FROM agent_actions WHERE id = $1`, [keptAction])).toHaveLength(1);
    expect((await me(bystander.access).expect(200)).body.id).toBe(bystander.id);
    // the month keeps counting the erased user (delete and re-create cannot make room in the allowance)
    const [mauAfter] = await t.db.query<{ n: number }>(`SELECT active_users AS n FROM tenant_mau WHERE tenant_id = $1`, [owner.tenantId]);
    expect(mauAfter.n).toBe(mauBefore.n);

    // one audit event, without the address; no audit row of the tenant ever held it
    expect(await deletedEvents(owner.tenantId, u.id)).toEqual([
      {
        actor_type: 'dashboard_user',
        actor_id: owner.userId,
        target_type: 'user',
        severity: 'high',
        metadata: { was_anonymous: false, sessions_ended: 2, agent_actions_deleted: 1, unsent_mails_dropped: mails.length + 1 },
      },
    ]);
    const leaks = await t.db.query(`SELECT type FROM audit_events WHERE tenant_id = $1 AND (metadata::text ILIKE $2 OR coalesce(target_id, '') ILIKE $2 OR coalesce(actor_id, '') ILIKE $2)`, [
      owner.tenantId,
      `%${local}%`,
    ]);
    expect(leaks).toEqual([]);
    expect(await webhookEvents(owner.tenantId, u.id)).toEqual([{ topic: 'webhook', payload: { user_id: u.id } }]);
    // the cached profile is gone from Redis (a tombstone, never the address)
    const redis = rawRedis();
    try {
      const slot = await redis.get(`${process.env.REDIS_KEY_PREFIX}me:${u.id}`);
      expect(slot === null || slot.startsWith('-')).toBe(true);
    } finally {
      redis.disconnect();
    }

    // a repeat: 404, nothing more
    expect((await as(t, owner).delete(url(owner, `/${u.id}`)).expect(404)).body.code).toBe('user/not_found');
    expect((await as(t, owner).get(url(owner, `/${u.id}`)).expect(404)).body.code).toBe('user/not_found');
    expect(await deletedEvents(owner.tenantId, u.id)).toHaveLength(1);
    expect((await as(t, owner).get(`${url(owner)}?email=${encodeURIComponent(email)}`).expect(200)).body.data).toEqual([]);

    // the address is free: a new account with a new id (any spelling)
    const again = await register(owner, email.toUpperCase());
    expect(again.id).not.toBe(u.id);
    expect((await login(owner, email)).status).toBe(200);
    expect((await as(t, owner).get(`${url(owner)}?email=${encodeURIComponent(email)}`).expect(200)).body.data.map((x: { id: string }) => x.id)).toEqual([again.id]);
  });

  /**
   * What the failed sign-in throttle keeps in Redis for each account the user is counted under
   * (LoginThrottleService): known client addresses (sorted set) and the account-wide failure count.
   */
  const throttleState = async (tenantId: string, userId: string, email: string) => {
    const code = codeThrottleSubject({ purpose: 'login', tenantId, emailNormalized: normalizeEmail(email) });
    return {
      password: await accountThrottle(passwordSignInRealm(tenantId), normalizeEmail(email)),
      code: await accountThrottle(code.realm, code.account),
      mfa: await accountThrottle(mfaThrottleRealm(tenantId), userId),
    };
  };

  it("erasure forgets the failed sign-in throttle's state of the account (known client addresses, account failure count; password sign-in, sign-in codes, second factors): a new account of the address inherits none", async () => {
    const owner = await tenantOnTier(t, 'pro');
    const email = `kim.${tag()}@example.com`;
    const oldIp = randomIp();
    const u = await register(owner, email, oldIp);
    // the erased person's address known in every realm (a sign-in code, a second factor from it), and one failure
    const throttle = t.app.get(LoginThrottleService);
    const code = codeThrottleSubject({ purpose: 'login', tenantId: owner.tenantId, emailNormalized: normalizeEmail(email) });
    await throttle.trustAddress(code.realm, code.account, oldIp);
    await throttle.trustAddress(mfaThrottleRealm(owner.tenantId), u.id, oldIp);
    expect((await login(owner, email, 'not the password, sorry')).status).toBe(401);
    expect(await throttleState(owner.tenantId, u.id, email)).toEqual({ password: { known: 1, failures: 1 }, code: { known: 1, failures: 0 }, mfa: { known: 1, failures: 0 } });

    await as(t, owner).delete(url(owner, `/${u.id}`)).expect(204);
    const gone = { known: 0, failures: 0 };
    expect(await throttleState(owner.tenantId, u.id, email)).toEqual({ password: gone, code: gone, mfa: gone });

    // a new account of the address knows its own address only
    const again = await register(owner, email.toUpperCase());
    expect((await throttleState(owner.tenantId, again.id, email)).password).toEqual({ known: 1, failures: 0 });
  });

  it('Redis refusing to forget the throttle state: before the commit nothing is erased (503) and the retry does it all; after the commit the erasure holds (503, the state forgotten already) and the retry answers 404', async () => {
    const owner = await tenantOnTier(t, 'pro');
    const throttle = t.app.get(LoginThrottleService);
    const refused = () => Promise.reject(new AppError('server/unavailable', 'Rate limiter unavailable'));
    const spy = jest.spyOn(throttle, 'forgetAccounts');
    try {
      // inside the transaction: rolled back
      const first = await register(owner);
      spy.mockImplementationOnce(refused);
      expect((await as(t, owner).delete(url(owner, `/${first.id}`)).expect(503)).body.code).toBe('server/unavailable');
      expect(await t.db.query(`SELECT 1 FROM users WHERE id = $1`, [first.id])).toHaveLength(1);
      expect((await throttleState(owner.tenantId, first.id, first.email)).password.known).toBe(1);
      expect(await deletedEvents(owner.tenantId, first.id)).toEqual([]);
      await as(t, owner).delete(url(owner, `/${first.id}`)).expect(204);
      expect((await throttleState(owner.tenantId, first.id, first.email)).password.known).toBe(0);

      // after the commit: the erasure holds, told by 503; the state went inside the transaction
      const second = await register(owner);
      spy.mockImplementationOnce((accounts) => LoginThrottleService.prototype.forgetAccounts.call(throttle, accounts)).mockImplementationOnce(refused);
      expect((await as(t, owner).delete(url(owner, `/${second.id}`)).expect(503)).body.code).toBe('server/unavailable');
      expect(await t.db.query(`SELECT 1 FROM users WHERE id = $1`, [second.id])).toHaveLength(0);
      expect((await throttleState(owner.tenantId, second.id, second.email)).password.known).toBe(0);
      expect((await as(t, owner).delete(url(owner, `/${second.id}`)).expect(404)).body.code).toBe('user/not_found');
    } finally {
      spy.mockRestore();
    }
  });

  it('an agent token acting for an erased user is inactive at introspection at once and refused on bearer calls (it has no session to end)', async () => {
    const owner = await tenantOnTier(t, 'pro');
    const u = await register(owner);
    const bystander = await register(owner);
    const agent = await registerAgent(t, owner);
    const [forUser, forBystander] = await Promise.all([u, bystander].map((x) => agentToken(t, { userId: x.id, tenantId: owner.tenantId }, agent.id)));
    const introspect = async (token: string) =>
      (await t.http().post('/oauth/introspect').set('X-API-Key', await keyOf(owner)).type('form').send({ token }).expect(200)).body as { active: boolean; sub?: string };
    expect(await introspect(forUser.token)).toMatchObject({ active: true, sub: u.id });

    await as(t, owner).delete(url(owner, `/${u.id}`)).expect(204);

    expect(await introspect(forUser.token)).toEqual({ active: false });
    expect((await me(forUser.token).expect(401)).body.code).toBe('auth/invalid_token');
    // another user's token from the same agent is untouched
    expect(await introspect(forBystander.token)).toMatchObject({ active: true, sub: bystander.id });
    expect((await me(forBystander.token).expect(200)).body.id).toBe(bystander.id);
  });

  it('erases a guest the same way', async () => {
    const owner = await signupTenant(t);
    const g = await guest(owner);
    expect((await me(g.access).expect(200)).body.is_anonymous).toBe(true);
    expect((await as(t, owner).get(url(owner, `/${g.id}`)).expect(200)).body).toEqual(expect.objectContaining({ id: g.id, email: null, is_anonymous: true }));
    await as(t, owner).delete(url(owner, `/${g.id}`)).expect(204);
    expect((await me(g.access).expect(401)).body.code).toBe('auth/invalid_token');
    const r = await refresh(owner, g.refresh);
    expect([r.status, r.body.code]).toEqual([401, 'auth/invalid_refresh_token']);
    expect(await rowsNaming(g.id)).toEqual({});
    expect((await deletedEvents(owner.tenantId, g.id))[0].metadata).toEqual({ was_anonymous: true, sessions_ended: 1, agent_actions_deleted: 0, unsent_mails_dropped: 0 });
    expect(await webhookEvents(owner.tenantId, g.id)).toHaveLength(1);
    expect((await as(t, owner).delete(url(owner, `/${g.id}`)).expect(404)).body.code).toBe('user/not_found');
  });

  it('two parallel DELETEs of one user: exactly one 204, the other 404; one audit event, one webhook event', async () => {
    const owner = await signupTenant(t);
    for (let round = 0; round < 3; round++) {
      const u = await register(owner);
      await login(owner, u.email);
      const statuses = (await Promise.all([as(t, owner).delete(url(owner, `/${u.id}`)), as(t, owner).delete(url(owner, `/${u.id}`))])).map((r) => r.status).sort();
      expect(statuses).toEqual([204, 404]);
      expect(await deletedEvents(owner.tenantId, u.id)).toHaveLength(1);
      expect(await webhookEvents(owner.tenantId, u.id)).toHaveLength(1);
      expect(await rowsNaming(u.id)).toEqual({});
    }
  });

  it('webhook endpoints may subscribe to user.deleted', async () => {
    const owner = await signupTenant(t);
    const res = await as(t, owner).post(`/v1/auth/dashboard/tenants/${owner.slug}/webhooks`, { url: 'http://127.0.0.1:9/hooks', events: ['user.deleted'] }).expect(201);
    expect(res.body.events).toEqual(['user.deleted']);
  });
});
