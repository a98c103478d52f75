import { PasswordHasher } from '../../../src/shared/crypto/password-hasher';
import { signupTenant } from '../../factories/dashboard.factory';
import { randomIp, STRONG_PASSWORD, TestApp, uniqueEmail } from '../../setup/app';
import { linkToken, MailWorld, sha256Hex, startMailWorld } from '../account-security/account-security.helpers';

/**
 * A tenant administrator who forgot the dashboard password gets a reset link by email (the
 * same 202 for every address), sets a new password once with it, and every dashboard session of
 * the account ends. Mail goes through the real outbox, worker and an SMTP capture server.
 */
describe('dashboard password reset', () => {
  let w: MailWorld;
  let t: TestApp;
  beforeAll(async () => {
    w = await startMailWorld({ RATE_LIMIT_EMAIL_PER_ADDRESS: '3' });
    t = w.t;
  }, 60_000);
  afterAll(() => w.close());

  const forgot = (email: string, ip = randomIp()) => t.http().post('/v1/auth/dashboard/password/forgot').set('X-Forwarded-For', ip).send({ email });
  const reset = (token: string, password: string, ip = randomIp()) => t.http().post('/v1/auth/dashboard/password/reset').set('X-Forwarded-For', ip).send({ token, password });
  const login = (email: string, password: string) => t.http().post('/v1/auth/dashboard/login').set('X-Forwarded-For', randomIp()).send({ email, password });
  const NEW_PASSWORD = 'a brand new dashboard passphrase';

  it('mails a single-use link; the reset sets the password, ends every dashboard session of the account, mails a notice and is audited', async () => {
    const owner = await signupTenant(t);
    const other = await login(owner.email, STRONG_PASSWORD).expect(200);
    // any spelling of the address
    const accepted = await forgot(owner.email.toUpperCase()).expect(202);
    const unknown = await forgot(uniqueEmail('nobody')).expect(202);
    expect(accepted.body).toEqual(unknown.body);
    const mail = await w.nextMail((m) => m.to.includes(owner.email) && m.subject.includes('Reset your dashboard password'));
    const token = linkToken(mail, '/dashboard/reset-password');
    // only the hash is stored
    const [row] = await t.db.query<{ token_hash: string }>(`SELECT r.token_hash FROM dashboard_password_resets r WHERE r.user_id = $1`, [owner.userId]);
    expect(row.token_hash).toBe(sha256Hex(token));

    await reset(token, NEW_PASSWORD).expect(204);
    await login(owner.email, STRONG_PASSWORD).expect(401);
    await login(owner.email, NEW_PASSWORD).expect(200);
    // the sessions signed in with the old password are over
    await t.http().get('/v1/auth/dashboard/me').set('Cookie', owner.cookie).expect(401);
    const otherCookie = (other.headers['set-cookie'] as unknown as string[]).find((c) => c.startsWith('authp_dashboard='))!.split(';')[0];
    await t.http().get('/v1/auth/dashboard/me').set('Cookie', otherCookie).expect(401);
    // single use
    expect((await reset(token, 'yet another good passphrase').expect(400)).body.code).toBe('token/invalid');
    await w.nextMail((m) => m.to.includes(owner.email) && m.subject.includes('Your dashboard password was reset'));
    const audits = await t.db.query<{ type: string; metadata: Record<string, unknown> }>(
      `SELECT type, metadata FROM audit_events WHERE target_id = $1 AND type LIKE 'dashboard.password_reset%' ORDER BY created_at`,
      [owner.userId],
    );
    expect(audits).toEqual([
      { type: 'dashboard.password_reset_requested', metadata: { mail_sent: true } },
      { type: 'dashboard.password_reset', metadata: { sessions_ended: 2, invites_withdrawn: 0 } },
    ]);
  });

  it('a new request replaces the earlier link; an expired, unknown or malformed token is 400; bad bodies 400', async () => {
    const owner = await signupTenant(t);
    await forgot(owner.email).expect(202);
    const first = linkToken(await w.nextMail((m) => m.to.includes(owner.email)), '/dashboard/reset-password');
    await forgot(owner.email).expect(202);
    const second = linkToken(await w.nextMail((m) => m.to.includes(owner.email)), '/dashboard/reset-password');
    expect((await reset(first, NEW_PASSWORD).expect(400)).body.code).toBe('token/invalid');
    await t.db.query(`UPDATE dashboard_password_resets SET expires_at = now() - interval '1 second' WHERE user_id = $1`, [owner.userId]);
    expect((await reset(second, NEW_PASSWORD).expect(400)).body.code).toBe('token/invalid');
    expect((await reset('x'.repeat(43), NEW_PASSWORD).expect(400)).body.code).toBe('token/invalid');
    await login(owner.email, STRONG_PASSWORD).expect(200);
    for (const body of [{}, { token: second }, { token: second, password: 'short' }, { token: second, password: 'x'.repeat(129) }, { token: '', password: NEW_PASSWORD }, { token: second, password: NEW_PASSWORD, extra: 1 }]) {
      expect((await t.http().post('/v1/auth/dashboard/password/reset').send(body).expect(400)).body.code).toBe('request/invalid');
    }
    for (const body of [{}, { email: 'not-an-email' }, { email: owner.email, extra: 1 }]) {
      expect((await t.http().post('/v1/auth/dashboard/password/forgot').send(body).expect(400)).body.code).toBe('request/invalid');
    }
  });

  it('one link used in parallel: exactly one reset', async () => {
    const owner = await signupTenant(t);
    await forgot(owner.email).expect(202);
    const token = linkToken(await w.nextMail((m) => m.to.includes(owner.email)), '/dashboard/reset-password');
    const answers = await Promise.all(Array.from({ length: 5 }, (_, i) => reset(token, `${NEW_PASSWORD} ${i}`)));
    expect(answers.map((a) => a.status).sort()).toEqual([204, 400, 400, 400, 400]);
    expect(await t.db.query(`SELECT 1 FROM audit_events WHERE target_id = $1 AND type = 'dashboard.password_reset'`, [owner.userId])).toHaveLength(1);
  });

  it('a sign-in whose password was checked before a reset committed opens no session after it', async () => {
    const owner = await signupTenant(t);
    const newHash = await t.app.get(PasswordHasher).hash(NEW_PASSWORD);
    // the reset holds the account's row while the sign-in (its password already checked) waits for it
    const outcome = await t.db.tx(async (tx) => {
      await tx.query(`SELECT 1 FROM dashboard_users WHERE id = $1 FOR UPDATE`, [owner.userId]);
      const signIn = login(owner.email, STRONG_PASSWORD).then((r) => r);
      await new Promise((r) => setTimeout(r, 400));
      await tx.query(`UPDATE dashboard_users SET password_hash = $2 WHERE id = $1`, [owner.userId, newHash]);
      await tx.query(`UPDATE dashboard_sessions SET revoked_at = now() WHERE user_id = $1 AND revoked_at IS NULL`, [owner.userId]);
      return { signIn }; // not the promise itself: the transaction must commit before it is awaited
    });
    const res = await outcome.signIn;
    expect([res.status, res.body.code]).toEqual([401, 'auth/invalid_credentials']);
    expect(await t.db.query(`SELECT 1 FROM dashboard_sessions WHERE user_id = $1 AND revoked_at IS NULL`, [owner.userId])).toHaveLength(0);
    await login(owner.email, NEW_PASSWORD).expect(200);
  });

  it('a dead link costs no password hash; parallel requests leave one live link', async () => {
    const hash = jest.spyOn(t.app.get(PasswordHasher), 'hash');
    try {
      expect((await reset('y'.repeat(43), NEW_PASSWORD).expect(400)).body.code).toBe('token/invalid');
      expect(hash).not.toHaveBeenCalled();
    } finally {
      hash.mockRestore();
    }
    const owner = await signupTenant(t);
    await Promise.all(Array.from({ length: 3 }, () => forgot(owner.email).expect(202)));
    expect(await t.db.query(`SELECT 1 FROM dashboard_password_resets WHERE user_id = $1 AND used_at IS NULL`, [owner.userId])).toHaveLength(1);
  });

  it('limits requests per address (429 with Retry-After, for known and unknown addresses alike)', async () => {
    for (const email of [(await signupTenant(t)).email, uniqueEmail('ghost')]) {
      for (let i = 0; i < 3; i++) await forgot(email).expect(202);
      const refused = await forgot(email).expect(429);
      expect(refused.body.code).toBe('rate_limit/exceeded');
      expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
      expect(refused.headers['x-service-docs']).toMatch(/^http/);
    }
  });
});
