import { tenantWithKey, TenantWithKey } from '../account-security/account-security.helpers';
import { createTestApp, randomIp, STRONG_PASSWORD, TestApp, uniqueEmail } from '../../setup/app';
import { gateWrites } from '../../setup/hold-writes';
import { claimsOf, TotpDevice } from '../mfa/mfa.helpers';

jest.setTimeout(90_000);

const DAY = 86_400;

/**
 * TOTP enrollment (verify-setup) against what runs beside it: a sign-out everywhere, an erasure of
 * the user, a refresh of another session, another session's calls. Locks are taken in one order
 * (the user's sessions, the user row, the factor, the enrollment grants), so none of them deadlocks
 * (a 503), and another caller's calls hold none of the owner's MFA attempts.
 */
describe('MFA enrollment races: verify-setup beside logout, erasure, refresh and other sessions', () => {
  let t: TestApp;
  let owner: TenantWithKey;
  let key: string;
  beforeAll(async () => {
    t = await createTestApp();
    owner = await tenantWithKey(t);
    key = owner.apiKey;
  });
  afterAll(() => t.close());

  const bearer = (token: string) => ({ Authorization: `Bearer ${token}`, 'X-Forwarded-For': randomIp() });
  const register = async () => {
    const email = uniqueEmail('mfa-race');
    const res = await t.http().post('/v1/auth/register').set('X-API-Key', key).set('X-Forwarded-For', randomIp()).send({ email, password: STRONG_PASSWORD, consent: true }).expect(201);
    return { email, userId: res.body.user.id as string, access: res.body.access_token as string, refresh: res.body.refresh_token as string };
  };
  const login = (email: string) => t.http().post('/v1/auth/login').set('X-API-Key', key).set('X-Forwarded-For', randomIp()).send({ email, password: STRONG_PASSWORD });
  const refresh = (rt: string) => t.http().post('/v1/auth/refresh').set('X-API-Key', key).set('X-Forwarded-For', randomIp()).send({ refresh_token: rt });
  const setup = (token: string) => t.http().post('/v1/auth/mfa/totp/setup').set(bearer(token));
  const verifySetup = (token: string, code: string) => t.http().post('/v1/auth/mfa/totp/verify-setup').set(bearer(token)).send({ code });
  const erase = (userId: string) => t.http().delete(`/v1/auth/dashboard/tenants/${owner.slug}/users/${userId}`).set('Cookie', owner.cookie).set('X-CSRF-Token', owner.csrf);
  /** policy required, grace over for this user (created 60 days ago, required 10 days ago, 3 days' grace) */
  const enforce = async (userId: string) => {
    await t.db.query(`UPDATE users SET created_at = now() - make_interval(secs => $2) WHERE id = $1`, [userId, 60 * DAY]);
    await t.db.query(`UPDATE tenants SET mfa_policy = 'required', mfa_grace_period_days = 3, mfa_required_since = now() - make_interval(secs => $2) WHERE id = $1`, [owner.tenantId, 10 * DAY]);
    await t.tenantChanged(owner.tenantId);
  };
  const relax = async () => {
    await t.db.query(`UPDATE tenants SET mfa_policy = 'optional', mfa_required_since = NULL WHERE id = $1`, [owner.tenantId]);
    await t.tenantChanged(owner.tenantId);
  };
  afterEach(relax);

  type Answer = { status: number; body: Record<string, any> };
  /**
   * Runs `verify` (a verify-setup of user `userId`) until it holds the user's sessions, the user row
   * and the factor (gated at the factor's enable), then `other`, and lets verify-setup go once a
   * request of `other` waits on its locks: both answers.
   */
  async function besideVerifySetup(userId: string, verify: () => Promise<Answer>, other: () => Promise<Answer>): Promise<[Answer, Answer]> {
    const gate = await gateWrites(t.db, 'user_mfa_factors', 'UPDATE', `NEW.user_id = '${userId}' AND NEW.enabled_at IS NOT NULL`);
    try {
      const verifying = verify().then((r) => r);
      const pid = await gate.reached();
      const racing = other().then((r) => r);
      await gate.waitedOnBy(pid);
      await gate.open();
      return await Promise.all([verifying, racing]);
    } finally {
      await gate.release();
    }
  }
  /** A user without a live session under an enforced policy, its sign-in's enrollment-only token (no sid) with setup called, and a code. */
  async function signInEnrollment() {
    const u = await register();
    await t.http().post('/v1/auth/logout').set(bearer(u.access)).expect(204); // no live session left
    await enforce(u.userId);
    const enrollment = (await login(u.email).expect(403)).body.enrollment_token as string;
    const device = new TotpDevice((await setup(enrollment).expect(200)).body.secret);
    return { u, enrollment, code: await device.next() };
  }

  it('verify-setup (with the enrollment-only token of a refresh) and a sign-out everywhere from another session of the user: both succeed, no 503 deadlock', async () => {
    const u = await register(); // session A
    const b = (await login(u.email).expect(200)).body; // session B
    await enforce(u.userId);
    const refused = await refresh(u.refresh).expect(403);
    const enrollment = refused.body.enrollment_token as string;
    expect(claimsOf(enrollment).sid).toBe(claimsOf(u.access).sid);
    const device = new TotpDevice((await setup(enrollment).expect(200)).body.secret);
    const code = await device.next();
    // B signs out everywhere while verify-setup holds the locks (it used to delete the user's pending
    // challenges, the enrollment grant, before locking the sessions: a deadlock)
    const [v, l] = await besideVerifySetup(u.userId, () => verifySetup(enrollment, code), () => t.http().post('/v1/auth/logout?scope=global').set(bearer(b.access_token)));
    expect({ verify: [v.status, v.body.code], logout: [l.status, l.body.code] }).toEqual({ verify: [200, undefined], logout: [204, undefined] });
  });

  it('verify-setup (with a sign-in enrollment-only token, no live session) racing the user\'s erasure: erasure 204, verify-setup 200 or 401, never 5xx', async () => {
    const { u, enrollment, code } = await signInEnrollment();
    const [v, e] = await besideVerifySetup(u.userId, () => verifySetup(enrollment, code), () => erase(u.userId));
    expect(e.status).toBe(204);
    expect([200, 401]).toContain(v.status);
    expect((await t.db.query(`SELECT 1 FROM users WHERE id = $1`, [u.userId])).length).toBe(0);
  });
  it('verify-setup of a user whose erasure commits while it waits: 401 (the user is gone, as setup answers), not 409 mfa/setup_required', async () => {
    const { u, enrollment, code } = await signInEnrollment();
    // the erasure stops at its audit row, after deleting the user (uncommitted)
    const gate = await gateWrites(t.db, 'audit_events', 'INSERT', `NEW.type = 'user.deleted' AND NEW.target_id = '${u.userId}'`);
    try {
      const erasing = erase(u.userId).then((r) => r);
      const pid = await gate.reached();
      const verifying = verifySetup(enrollment, code).then((r) => r);
      await gate.waitedOnBy(pid);
      await gate.open();
      const [v, e] = await Promise.all([verifying, erasing]);
      expect(e.status).toBe(204);
      expect({ status: v.status, code: v.body.code }).toMatchObject({ status: 401 });
    } finally {
      await gate.release();
    }
  });
  it("another session's verify-setup calls (409, 'not counted') in flight do not refuse the owner's verify-setup with 429", async () => {
    const owner = await register();
    const stale = (await login(owner.email).expect(200)).body;
    await t.db.query(`UPDATE user_sessions SET created_at = created_at - interval '1 hour', authenticated_at = authenticated_at - interval '1 hour' WHERE id = $1`, [claimsOf(stale.access_token).sid]);
    const staleToken = (await refresh(stale.refresh_token).expect(200)).body.access_token as string;
    await setup(staleToken).expect(403);
    const device = new TotpDevice((await setup(owner.access).expect(200)).body.secret);
    // the stale session's requests are slowed down (here: a lock on one of the user's sessions, as a
    // refresh in flight holds it); each has reserved a pending attempt in the MFA throttle
    const holder = await t.db.pool.connect();
    let released = false;
    const release = async () => {
      if (released) return;
      released = true;
      await holder.query('ROLLBACK');
      holder.release();
    };
    try {
      await holder.query('BEGIN');
      await holder.query(`SELECT 1 FROM user_sessions WHERE id = $1 FOR UPDATE`, [claimsOf(stale.access_token).sid]);
      const ips = [randomIp(), randomIp()];
      let settled = 0;
      const staleCalls = Array.from({ length: 10 }, (_, i) =>
        t.http().post('/v1/auth/mfa/totp/verify-setup').set('Authorization', `Bearer ${staleToken}`).set('X-Forwarded-For', ips[i % 2]).send({ code: '000000' }).then((r) => {
          settled++;
          return r;
        }),
      );
      // until each stale call has answered or waits on the held lock (in flight, as before the fix)
      for (let i = 0; ; i++) {
        const [r] = await t.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`);
        if (r.n + settled >= 10 || i > 400) break;
        await new Promise((res) => setTimeout(res, 25));
      }
      const ownerCall = verifySetup(owner.access, await device.next()).then((r) => r);
      setTimeout(() => void release(), 1500);
      const o = await ownerCall;
      const staleResults = await Promise.all(staleCalls);
      expect(staleResults.map((r) => r.status)).toEqual(Array(10).fill(409));
      expect([o.status, o.body.code]).toEqual([200, undefined]);
    } finally {
      await release();
    }
  });
  it('a refresh of another AAL1 session racing verify-setup waits and is refused after; its access token too', async () => {
    const u = await register();
    const b = (await login(u.email).expect(200)).body;
    const device = new TotpDevice((await setup(u.access).expect(200)).body.secret);
    const code = await device.next();
    const [v, r] = await besideVerifySetup(u.userId, () => verifySetup(u.access, code), () => refresh(b.refresh_token));
    expect(v.status).toBe(200);
    expect([r.status, r.body.code]).toEqual([401, 'auth/invalid_refresh_token']);
    await t.http().get('/v1/auth/me').set(bearer(b.access_token)).expect(401);
    await refresh(u.refresh).expect(200);
  });

  it("a step-up's enrollment-only token (policy enforced) names the session: enrolling with it keeps that session, ends the other AAL1 one", async () => {
    const u = await register();
    const b = (await login(u.email).expect(200)).body;
    await enforce(u.userId);
    const res = await t.http().post('/v1/auth/step-up/password').set(bearer(u.access)).send({ password: STRONG_PASSWORD }).expect(403);
    const e = res.body.enrollment_token as string;
    expect(claimsOf(e).sid).toBe(claimsOf(u.access).sid);
    const device = new TotpDevice((await setup(e).expect(200)).body.secret);
    await verifySetup(e, await device.next()).expect(200);
    await refresh(u.refresh).expect(200);
    await refresh(b.refresh_token).expect(401);
    // the spent token enrolls nothing more, and a second verify-setup is 409 already_enabled
    expect((await verifySetup(u.access, '123456')).body.code).toBe('mfa/already_enabled');
    const audits = await t.db.query<{ metadata: { sessions_ended: number } }>(`SELECT metadata FROM audit_events WHERE type = 'user.mfa_enabled' AND target_id = $1`, [u.userId]);
    expect(audits.map((a) => a.metadata.sessions_ended)).toEqual([1]);
  });

  /** A user whose enrolling session's id is not among the lowest (so a new one sorts before it). */
  const enrollingUser = async () => {
    for (;;) {
      const u = await register();
      if (String(claimsOf(u.access).sid) > '4') return u;
    }
  };
  /** Signs in until a session whose id sorts before `than` exists (uuid order = hex string order). */
  const sessionBefore = async (email: string, than: string) => {
    for (let i = 0; i < 40; i++) {
      const r = await login(email);
      expect(r.status).toBe(200);
      if (String(claimsOf(r.body.access_token).sid) < than) return r.body.access_token as string;
    }
    throw new Error('no session id below the enrolling one in 40 sign-ins');
  };

  for (const other of ['sign-out everywhere', 'erasure'] as const) {
    const named = other === 'erasure' ? 'an erasure' : 'a sign-out everywhere';
    it(`a sign-in during verify-setup, then ${named} (which locks the new session first): no deadlock, both succeed; the new session is left alone by the enrollment`, async () => {
      const before = Number((await t.db.query<{ deadlocks: string }>(`SELECT deadlocks::text FROM pg_stat_database WHERE datname = current_database()`))[0].deadlocks);
      const u = await enrollingUser();
      const a = String(claimsOf(u.access).sid);
      const device = new TotpDevice((await setup(u.access).expect(200)).body.secret);
      const code = await device.next();
      // while verify-setup holds the user's sessions (A), the user row and the factor: a sign-in
      // (the README: a sign-in racing the enrollment can open a session), then the other request
      const [v, o] = await besideVerifySetup(u.userId, () => verifySetup(u.access, code), async () => {
        const n = await sessionBefore(u.email, a);
        return other === 'erasure' ? erase(u.userId) : t.http().post('/v1/auth/logout?scope=global').set(bearer(n));
      });
      const [{ deadlocks }] = await t.db.query<{ deadlocks: string }>(`SELECT deadlocks::text FROM pg_stat_database WHERE datname = current_database()`);
      expect({ verify: v.status < 500, other: [o.status, o.body.code], deadlocksSoFar: Number(deadlocks) > before }).toEqual({ verify: true, other: [204, undefined], deadlocksSoFar: false });
    });
  }
});
