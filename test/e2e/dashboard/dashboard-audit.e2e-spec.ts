import { createHash } from 'crypto';
import { DashboardFixture, sessionCookie, signupTenant } from '../../factories/dashboard.factory';
import { createTestApp, randomIp, STRONG_PASSWORD, TestApp, uniqueEmail } from '../../setup/app';
import { expectedClientHash } from '../../setup/client-hash';

const sha256Hex = (s: string) => createHash('sha256').update(s).digest('hex');

interface AuditRow {
  tenant_id: string | null;
  type: string;
  severity: string;
  actor_type: string;
  actor_id: string | null;
  target_type: string | null;
  target_id: string | null;
  metadata: Record<string, unknown>;
}

/**
 * Security-relevant dashboard actions leave audit events (tenant_id null: a dashboard account is
 * no one tenant's), with the client as keyed hash prefixes; failed password checks at most once
 * per account and LOGIN_FAILURE_WINDOW_SECONDS.
 */
describe('dashboard audit events: sign-in, failed sign-in, reauth, sign-out', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(() => t.close());

  const events = (type: string, targetId: string) =>
    t.db.query<AuditRow>(
      `SELECT tenant_id, type, severity, actor_type, actor_id, target_type, target_id, metadata FROM audit_events WHERE type = $1 AND target_id = $2 ORDER BY created_at`,
      [type, targetId],
    );
  const login = (email: string, password: string, ip = randomIp(), ua = 'test-agent/1') =>
    t.http().post('/v1/auth/dashboard/login').set('X-Forwarded-For', ip).set('User-Agent', ua).send({ email, password });
  const sessionIdOf = async (cookie: string) =>
    (await t.db.query<{ id: string }>(`SELECT id FROM dashboard_sessions WHERE token_hash = $1`, [sha256Hex(cookie.split('=')[1])]))[0].id;
  const reauth = (d: { cookie: string; csrf: string }, password: string, ip = randomIp(), ua = 'test-agent/1') =>
    t.http().post('/v1/auth/dashboard/reauth').set('Cookie', d.cookie).set('X-CSRF-Token', d.csrf).set('X-Forwarded-For', ip).set('User-Agent', ua).send({ password });
  const client = (ip: string, ua: string) => ({ ip_hash_prefix: expectedClientHash(ip), user_agent_hash_prefix: expectedClientHash(ua) });

  it('a sign-in writes dashboard.signed_in with the client as hash prefixes', async () => {
    const d = await signupTenant(t);
    const [ip, ua] = [randomIp(), 'Mozilla/5.0 (signed-in)'];
    await login(d.email, d.password, ip, ua).expect(200);
    expect(await events('dashboard.signed_in', d.userId)).toEqual([
      { tenant_id: null, type: 'dashboard.signed_in', severity: 'info', actor_type: 'dashboard_user', actor_id: d.userId, target_type: 'dashboard_user', target_id: d.userId, metadata: { method: 'password', ...client(ip, ua) } },
    ]);
  });

  it('a wrong password writes dashboard.sign_in_failed for the account (hash prefixes, no address or agent in clear)', async () => {
    const d = await signupTenant(t);
    const [ip, ua] = [randomIp(), 'Mozilla/5.0 (attacker)'];
    expect((await login(d.email, 'wrong-password-1', ip, ua).expect(401)).body.code).toBe('auth/invalid_credentials');
    const rows = await events('dashboard.sign_in_failed', d.userId);
    expect(rows).toEqual([
      { tenant_id: null, type: 'dashboard.sign_in_failed', severity: 'medium', actor_type: 'anonymous', actor_id: null, target_type: 'dashboard_user', target_id: d.userId, metadata: { method: 'password', flow: 'login', ...client(ip, ua) } },
    ]);
    expect(JSON.stringify(rows)).not.toContain(ip);
    expect(JSON.stringify(rows)).not.toContain('attacker');
    expect(JSON.stringify(rows)).not.toContain(d.email);
  });

  it('failed sign-ins are recorded at most once per account and window, however many there are; throttled refusals and unknown addresses write none', async () => {
    const d = await signupTenant(t);
    // spread over many addresses (each pair stays under its limit) and one address past its pair limit
    for (let i = 0; i < 8; i++) await login(d.email, `wrong-password-${i}`).expect(401);
    const ip = randomIp();
    const burst = await Promise.all(Array.from({ length: 15 }, () => login(d.email, 'wrong-password-x', ip)));
    expect(burst.filter((r) => r.status === 429).length).toBeGreaterThan(0);
    // addresses without an account, from an address of their own
    const prober = randomIp();
    for (let i = 0; i < 5; i++) await login(uniqueEmail('nobody'), 'wrong-password-1', prober).expect(401);
    expect(await events('dashboard.sign_in_failed', d.userId)).toHaveLength(1);
    const fromProber = await t.db.query(`SELECT 1 FROM audit_events WHERE type = 'dashboard.sign_in_failed' AND metadata->>'ip_hash_prefix' = $1`, [expectedClientHash(prober)]);
    expect(fromProber).toHaveLength(0);
    // the owner still signs in from elsewhere; a success writes no failure
    await login(d.email, d.password).expect(200);
    expect(await events('dashboard.sign_in_failed', d.userId)).toHaveLength(1);
  });

  it('a wrong password for an existing account on an invitation is a failed sign-in too (flow invite_accept), bounded the same way', async () => {
    const [inviter, invitee] = [await signupTenant(t), await signupTenant(t)];
    const inv = await t.http().post(`/v1/auth/dashboard/tenants/${inviter.slug}/members`).set('Cookie', inviter.cookie).set('X-CSRF-Token', inviter.csrf).send({ email: invitee.email, role: 'member' }).expect(201);
    const [ip, ua] = [randomIp(), 'curl/8'];
    const accept = (password: string, from = randomIp()) => t.http().post('/v1/auth/dashboard/invites/accept').set('X-Forwarded-For', from).set('User-Agent', ua).send({ token: inv.body.invite_token, password });
    await accept('wrong-password-1', ip).expect(401);
    for (let i = 0; i < 3; i++) await accept('wrong-password-1').expect(401);
    await login(invitee.email, 'wrong-password-2').expect(401);
    expect(await events('dashboard.sign_in_failed', invitee.userId)).toEqual([
      expect.objectContaining({ actor_type: 'anonymous', metadata: { method: 'password', flow: 'invite_accept', ...client(ip, ua) } }),
    ]);
    expect(await events('dashboard.signed_in', invitee.userId)).toEqual([]);
    // the right password opens a session of the account: a sign-in (README), audited and dated as login's
    const okIp = randomIp();
    await accept(STRONG_PASSWORD, okIp).expect(200);
    expect(await events('dashboard.signed_in', invitee.userId)).toEqual([
      expect.objectContaining({ actor_type: 'dashboard_user', actor_id: invitee.userId, metadata: { method: 'password', flow: 'invite_accept', ...client(okIp, ua) } }),
    ]);
    const [{ last_login_at }] = await t.db.query<{ last_login_at: Date | null }>(`SELECT last_login_at FROM dashboard_users WHERE id = $1`, [invitee.userId]);
    expect(last_login_at).toBeInstanceOf(Date);
  });

  it('a reauth writes dashboard.reauthenticated; a wrong password dashboard.reauth_failed, once per account and window', async () => {
    const d = await signupTenant(t);
    const sessionId = await sessionIdOf(d.cookie);
    const [ip, ua] = [randomIp(), 'Mozilla/5.0 (reauth)'];
    await reauth(d, d.password, ip, ua).expect(200);
    expect(await events('dashboard.reauthenticated', sessionId)).toEqual([
      { tenant_id: null, type: 'dashboard.reauthenticated', severity: 'info', actor_type: 'dashboard_user', actor_id: d.userId, target_type: 'dashboard_session', target_id: sessionId, metadata: { method: 'password', ...client(ip, ua) } },
    ]);
    const [badIp, badUa] = [randomIp(), 'Mozilla/5.0 (stolen cookie)'];
    expect((await reauth(d, 'wrong-password-1', badIp, badUa).expect(401)).body.code).toBe('auth/invalid_credentials');
    for (let i = 0; i < 4; i++) await reauth(d, 'wrong-password-1').expect(401);
    // past the pair limit: refused without a password check, and without an event
    for (let i = 0; i < 5; i++) await reauth(d, 'wrong-password-1', badIp).expect(i < 4 ? 401 : 429);
    expect(await events('dashboard.reauth_failed', sessionId)).toEqual([
      { tenant_id: null, type: 'dashboard.reauth_failed', severity: 'medium', actor_type: 'dashboard_user', actor_id: d.userId, target_type: 'dashboard_session', target_id: sessionId, metadata: { method: 'password', ...client(badIp, badUa) } },
    ]);
    await reauth(d, d.password).expect(200);
    expect(await events('dashboard.reauthenticated', sessionId)).toHaveLength(2);
  });

  it('a logout writes dashboard.signed_out for the session; two logouts of one session at once write one', async () => {
    const d = await signupTenant(t);
    const sessionId = await sessionIdOf(d.cookie);
    const [ip, ua] = [randomIp(), 'Mozilla/5.0 (logout)'];
    await t.http().post('/v1/auth/dashboard/logout').set('Cookie', d.cookie).set('X-CSRF-Token', d.csrf).set('X-Forwarded-For', ip).set('User-Agent', ua).expect(204);
    expect(await events('dashboard.signed_out', sessionId)).toEqual([
      { tenant_id: null, type: 'dashboard.signed_out', severity: 'info', actor_type: 'dashboard_user', actor_id: d.userId, target_type: 'dashboard_session', target_id: sessionId, metadata: client(ip, ua) },
    ]);
    await t.http().post('/v1/auth/dashboard/logout').set('Cookie', d.cookie).set('X-CSRF-Token', d.csrf).expect(401);
    expect(await events('dashboard.signed_out', sessionId)).toHaveLength(1);

    const again = await login(d.email, d.password).expect(200);
    const s = { cookie: sessionCookie(again.headers['set-cookie']), csrf: again.body.csrf_token as string };
    const second = await sessionIdOf(s.cookie);
    const answers = await Promise.all([0, 1].map(() => t.http().post('/v1/auth/dashboard/logout').set('Cookie', s.cookie).set('X-CSRF-Token', s.csrf)));
    expect(answers.map((a) => a.status)).toContain(204);
    expect(await events('dashboard.signed_out', second)).toHaveLength(1);
    await t.http().get('/v1/auth/dashboard/me').set('Cookie', s.cookie).expect(401);
    // audit only, as dashboard.signed_in: no webhook (outbox) event
    expect(await t.db.query(`SELECT 1 FROM outbox WHERE event_type LIKE 'dashboard.%'`)).toHaveLength(0);
  });
});

describe('dashboard audit events: a new window records a failure again', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp({ LOGIN_FAILURE_WINDOW_SECONDS: '10' });
  });
  afterAll(() => t.close());

  it('one dashboard.sign_in_failed per account per LOGIN_FAILURE_WINDOW_SECONDS', async () => {
    const d: DashboardFixture = await signupTenant(t);
    const fail = () => t.http().post('/v1/auth/dashboard/login').set('X-Forwarded-For', randomIp()).send({ email: d.email, password: 'wrong-password-1' }).expect(401);
    const count = async () => (await t.db.query(`SELECT 1 FROM audit_events WHERE type = 'dashboard.sign_in_failed' AND target_id = $1`, [d.userId])).length;
    await fail();
    await fail();
    expect(await count()).toBe(1);
    await new Promise((r) => setTimeout(r, 10_500));
    await fail();
    await fail();
    expect(await count()).toBe(2);
  });
});
