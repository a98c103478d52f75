import * as argon2 from 'argon2';
import { PoolClient } from 'pg';
import { createTestApp, TestApp } from '../../setup/app';
import { createTenant, TenantFixture } from '../../factories/tenant.factory';
import { mfaApi } from '../mfa/mfa.helpers';

/**
 * A password sign-in checks the password, then opens a session (or an MFA challenge). A reset or
 * change committed between the two ends every session of the old password: the one opened after
 * it must not exist. The change is held here in an open transaction (as a reset's is, between its
 * update and its commit) so that the sign-in is caught exactly in between.
 */
describe('a password sign-in racing a change of that password', () => {
  let t: TestApp;
  let tenant: TenantFixture;
  let api: ReturnType<typeof mfaApi>;
  beforeAll(async () => {
    t = await createTestApp();
    tenant = await createTenant(t.db);
    api = mfaApi(t, tenant);
  });
  afterAll(() => t.close());

  /**
   * Runs `sql` in a transaction left open: `waiter` resolves once a statement of another session is
   * blocked by this transaction itself (not any lock wait of another test file), `commit` runs
   * `then` (if any) in the same transaction and commits.
   */
  async function heldTransaction(sql: string, params: unknown[]) {
    const client: PoolClient = await t.db.pool.connect();
    await client.query('BEGIN');
    await client.query(sql, params);
    const pid = (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0].pid;
    return {
      waiter: async () => {
        for (let i = 0; i < 400; i++) {
          const [r] = await t.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND $1 = ANY(pg_blocking_pids(pid))`, [pid]);
          if (r.n > 0) return;
          await new Promise((res) => setTimeout(res, 25));
        }
        throw new Error('no statement ever waited for the held transaction');
      },
      commit: async (then?: { sql: string; params: unknown[] }) => {
        if (then) await client.query(then.sql, then.params);
        await client.query('COMMIT');
        client.release();
      },
    };
  }

  /** Changes the user's password hash in a transaction left open until `commit` (a sign-in's statement waits for the row). */
  const pendingPasswordChange = (userId: string) => heldTransaction(`UPDATE users SET password_hash = 'changed-meanwhile' WHERE id = $1`, [userId]);

  const liveSessions = async (userId: string) =>
    (await t.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM user_sessions WHERE user_id = $1 AND revoked_at IS NULL`, [userId]))[0].n;

  it('the password was right when checked, but the change commits before the session starts: 401 and no session', async () => {
    const u = await api.register();
    const before = await liveSessions(u.userId);
    const change = await pendingPasswordChange(u.userId);
    const login = Promise.resolve(api.login(u.email, u.password));
    await change.waiter();
    await change.commit();
    const res = await login;
    expect(res.status).toBe(401);
    expect(res.body.code).toBe('auth/invalid_credentials');
    expect(await liveSessions(u.userId)).toBe(before);
  });

  it('the same for an MFA user: no challenge is made, so no session can follow it', async () => {
    const u = await api.enrolledUser();
    const change = await pendingPasswordChange(u.userId);
    const login = Promise.resolve(api.login(u.email, u.password));
    await change.waiter();
    await change.commit();
    const res = await login;
    expect(res.status).toBe(401);
    expect(res.body.code).toBe('auth/invalid_credentials');
    expect((await t.db.query(`SELECT 1 FROM mfa_challenges WHERE user_id = $1 AND kind = 'login'`, [u.userId])).length).toBe(0);
  });

  it('parallel sign-ins with the right password after the hashing configuration changed all succeed (each upgrades the hash; one is stored), MFA users too', async () => {
    // a hash made with other argon2id parameters than the app's: the first sign-ins upgrade it
    const older = () => argon2.hash(u0.password, { type: argon2.argon2id, memoryCost: 512, timeCost: 2, parallelism: 1 });
    const u0 = await api.register();
    const m0 = await api.enrolledUser();
    for (const [u, expectBody] of [
      [u0, (b: Record<string, unknown>) => expect(b.access_token).toEqual(expect.any(String))],
      [m0, (b: Record<string, unknown>) => expect(b.mfa_required).toBe(true)],
    ] as const) {
      await t.db.query(`UPDATE users SET password_hash = $2 WHERE id = $1`, [u.userId, await older()]);
      const answers = await Promise.all(Array.from({ length: 4 }, () => api.login(u.email, u.password)));
      expect(answers.map((r) => r.status)).toEqual([200, 200, 200, 200]);
      for (const r of answers) expectBody(r.body);
      const [row] = await t.db.query<{ password_hash: string }>(`SELECT password_hash FROM users WHERE id = $1`, [u.userId]);
      expect(row.password_hash).not.toContain('m=512');
    }
  });

  it("a password change while a refresh of one of the user's sessions is under way waits for it (no deadlock, no 5xx), then ends that session too", async () => {
    const u = await api.register();
    // the change keeps the caller's own session: the one being refreshed is another (a second sign-in)
    const other = await api.login(u.email, u.password).expect(200);
    const session = { id: JSON.parse(Buffer.from(other.body.access_token.split('.')[1], 'base64url').toString()).sid as string };
    // a refresh's order: the session row first, then the user's row (its activity)
    const refresh = await heldTransaction(`SELECT 1 FROM user_sessions WHERE id = $1 FOR UPDATE`, [session.id]);
    const change = Promise.resolve(
      t.http().post('/v1/auth/password/change').set('Authorization', `Bearer ${u.accessToken}`).send({ current_password: u.password, new_password: `${u.password} but longer` }),
    );
    await refresh.waiter();
    await refresh.commit({ sql: `UPDATE users SET last_active_at = now() WHERE id = $1`, params: [u.userId] });
    const res = await change;
    expect(res.status).toBe(204);
    expect(await t.db.query(`SELECT 1 FROM user_sessions WHERE id = $1 AND revoked_at IS NULL`, [session.id])).toHaveLength(0);
  });

  it('without a change the sign-in goes on as before (session, or challenge for an MFA user)', async () => {
    const u = await api.register();
    expect((await api.login(u.email, u.password).expect(200)).body.access_token).toEqual(expect.any(String));
    const m = await api.enrolledUser();
    await api.challenge(m.email, m.password);
  });
});
