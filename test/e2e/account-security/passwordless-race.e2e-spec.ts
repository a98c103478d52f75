import { authenticator } from 'otplib';
import { PoolClient } from 'pg';
import { bearerPost, linkToken, mailCode, MailWorld, post, register, startMailWorld, TenantWithKey, tenantWithKey } from './account-security.helpers';

/**
 * A magic-link or email-code sign-in consumes its link or code in one transaction and starts the
 * session (or the MFA challenge) in another. A password reset or change committed between the two
 * ends the sessions and challenges of the moment: the one started after it must not exist (review:
 * it did, and outlived the reset). The test holds the sign-in between its two transactions: a
 * transaction of its own locks the table the sign-in's MFA policy reads next (the proof's
 * transaction never reads it), changes the password once the proof has committed, and commits.
 */
describe('a passwordless sign-in racing a change of the password', () => {
  let w: MailWorld;
  let tenant: TenantWithKey;
  beforeAll(async () => {
    w = await startMailWorld();
    tenant = await tenantWithKey(w.t, { magic_link_enabled: true, email_otp_enabled: true });
  }, 60_000);
  afterAll(() => w?.close());

  const verifiedUser = async () => {
    const u = await register(w.t, tenant.apiKey);
    // verified, so the sign-in keeps the password (an unverified account's first proof clears it)
    await w.t.db.query(`UPDATE users SET email_verified = true WHERE id = $1`, [u.id]);
    return u;
  };
  const magicLink = async (email: string) => {
    await post(w.t, '/v1/auth/magic-link', tenant.apiKey, { email }).expect(202);
    return linkToken(await w.nextMail((m) => m.to.includes(email) && m.subject.startsWith('Your sign-in link')), '/magic-link');
  };
  const emailCode = async (email: string) => {
    await post(w.t, '/v1/auth/email-otp', tenant.apiKey, { email }).expect(202);
    return mailCode(await w.nextMail((m) => m.to.includes(email) && m.subject.endsWith('verification code')));
  };
  const liveSessions = async (userId: string) =>
    (await w.t.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM user_sessions WHERE user_id = $1 AND revoked_at IS NULL`, [userId]))[0].n;

  /**
   * Sends `signIn` with the MFA policy's table locked; once `proved()` (the proof committed) and the
   * sign-in's policy read waits for the lock, changes the user's password in the same transaction
   * and commits: the change lands exactly between the two transactions of the sign-in.
   */
  async function changeBetween(userId: string, signIn: () => Promise<{ status: number; body: Record<string, unknown> }>, proved: () => Promise<boolean>) {
    const client: PoolClient = await w.t.db.pool.connect();
    await client.query('BEGIN');
    await client.query('LOCK TABLE user_mfa_factors IN ACCESS EXCLUSIVE MODE');
    const pid = (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0].pid;
    const res = signIn();
    try {
      for (let i = 0; ; i++) {
        if (i > 400) throw new Error('the sign-in never waited for the policy read');
        const [r] = await w.t.db.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND $1 = ANY(pg_blocking_pids(pid)) AND query LIKE '%user_mfa_factors%'`,
          [pid],
        );
        if (r.n > 0 && (await proved())) break;
        await new Promise((done) => setTimeout(done, 25));
      }
      await client.query(`UPDATE users SET password_hash = 'changed-meanwhile' WHERE id = $1`, [userId]);
    } finally {
      await client.query('COMMIT');
      client.release();
    }
    return res;
  }

  const magicLinkWithChangeBetween = (userId: string, token: string) =>
    changeBetween(
      userId,
      () => Promise.resolve(post(w.t, '/v1/auth/magic-link/verify', tenant.apiKey, { token })),
      async () => (await w.t.db.query(`SELECT 1 FROM account_tokens WHERE user_id = $1 AND kind = 'magic_link' AND used_at IS NOT NULL`, [userId])).length > 0,
    );

  it('magic link: the link was good and is spent, the change commits before the session starts: 400 token/invalid (a dead link) and no session', async () => {
    const u = await verifiedUser();
    const token = await magicLink(u.email);
    const before = await liveSessions(u.id);
    const res = await magicLinkWithChangeBetween(u.id, token);
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('token/invalid');
    expect(await liveSessions(u.id)).toBe(before);
    expect(await w.t.db.query(`SELECT 1 FROM audit_events WHERE type = 'user.signed_in' AND target_id = $1 AND metadata->>'method' = 'magic_link'`, [u.id])).toHaveLength(0);
  });

  it('email code: the same, answered otp/invalid', async () => {
    const u = await verifiedUser();
    const code = await emailCode(u.email);
    const before = await liveSessions(u.id);
    const res = await changeBetween(
      u.id,
      () => Promise.resolve(post(w.t, '/v1/auth/email-otp/verify', tenant.apiKey, { email: u.email, code })),
      async () => (await w.t.db.query(`SELECT 1 FROM email_otp_codes WHERE user_id = $1 AND consumed_at IS NOT NULL`, [u.id])).length > 0,
    );
    expect(res.status).toBe(401);
    expect(res.body.code).toBe('otp/invalid');
    expect(await liveSessions(u.id)).toBe(before);
  });

  it('a user with MFA: no challenge is made, so no session can follow it', async () => {
    const u = await verifiedUser();
    const setup = await bearerPost(w.t, '/v1/auth/mfa/totp/setup', u.access, {}).expect(200);
    await bearerPost(w.t, '/v1/auth/mfa/totp/verify-setup', u.access, { code: authenticator.generate(setup.body.secret) }).expect(200);
    const token = await magicLink(u.email);
    const res = await magicLinkWithChangeBetween(u.id, token);
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('token/invalid');
    expect(await w.t.db.query(`SELECT 1 FROM mfa_challenges WHERE user_id = $1 AND kind = 'login'`, [u.id])).toHaveLength(0);
  });

  it('without a change in between, each signs in as before (an account without a password too)', async () => {
    const u = await verifiedUser();
    await post(w.t, '/v1/auth/magic-link/verify', tenant.apiKey, { token: await magicLink(u.email) }).expect(200);
    await post(w.t, '/v1/auth/email-otp/verify', tenant.apiKey, { email: u.email, code: await emailCode(u.email) }).expect(200);
    const v = await verifiedUser();
    await w.t.db.query(`UPDATE users SET password_hash = NULL WHERE id = $1`, [v.id]);
    await post(w.t, '/v1/auth/magic-link/verify', tenant.apiKey, { token: await magicLink(v.email) }).expect(200);
  });
});
