import { JwtService } from '../../../src/shared/crypto/jwt.service';
import { createApiKey, signupTenant, DashboardFixture } from '../../factories/dashboard.factory';
import { createTestApp, randomIp, STRONG_PASSWORD, TestApp, uniqueEmail } from '../../setup/app';
import { gateWrites } from '../../setup/hold-writes';

/**
 * An owner erases an end user (DELETE .../users/{id}) while a request of that user writes a row
 * that references the user (a TOTP seed, a reset, verification or magic link, a sign-in code). The
 * request locks the user's row first: an erasure arriving meanwhile waits for it and then removes
 * what it wrote; an erasure committed first leaves the request the unknown-address answer (202,
 * nothing written) or, for a bearer, 401. Never a 5xx from the dangling reference (contract: "5xx
 * means a fault of ours"), and no 202 that differs for an address with an account.
 */
describe('user erasure racing the user\'s own writes', () => {
  let t: TestApp;
  let owner: DashboardFixture;
  let key: string;
  beforeAll(async () => {
    t = await createTestApp();
    owner = await signupTenant(t);
    key = (await createApiKey(t, owner)).key;
    await t.db.query(`UPDATE tenants SET email_otp_enabled = true, magic_link_enabled = true WHERE id = $1`, [owner.tenantId]);
  });
  afterAll(() => t.close());

  const register = async () => {
    const email = uniqueEmail('erase');
    const res = await t.http().post('/v1/auth/register').set('X-API-Key', key).set('X-Forwarded-For', randomIp()).send({ email, password: STRONG_PASSWORD, consent: true }).expect(201);
    return { id: res.body.user.id as string, email, access: res.body.access_token as string };
  };
  const erase = (userId: string) =>
    t.http().delete(`/v1/auth/dashboard/tenants/${owner.slug}/users/${userId}`).set('Cookie', owner.cookie).set('X-CSRF-Token', owner.csrf);
  const rowsNaming = async (userId: string) =>
    (
      await t.db.query<{ n: number }>(
        `SELECT (SELECT count(*) FROM user_mfa_factors WHERE user_id = $1) + (SELECT count(*) FROM account_tokens WHERE user_id = $1)
              + (SELECT count(*) FROM email_otp_codes WHERE user_id = $1) + (SELECT count(*) FROM users WHERE id = $1) AS n`,
        [userId],
      )
    )[0].n;

  const cases: { name: string; table: string; send: (u: { email: string; access: string }) => Promise<{ status: number }>; status: number }[] = [
    { name: 'TOTP setup', table: 'user_mfa_factors', status: 200, send: (u) => t.http().post('/v1/auth/mfa/totp/setup').set('Authorization', `Bearer ${u.access}`).set('X-Forwarded-For', randomIp()).then((r) => r) },
    { name: 'forgot-password', table: 'account_tokens', status: 202, send: (u) => t.http().post('/v1/auth/password/forgot').set('X-API-Key', key).set('X-Forwarded-For', randomIp()).send({ email: u.email }).then((r) => r) },
    { name: 'verification resend', table: 'account_tokens', status: 202, send: (u) => t.http().post('/v1/auth/verify-email/resend').set('X-API-Key', key).set('X-Forwarded-For', randomIp()).send({ email: u.email }).then((r) => r) },
    { name: 'magic link', table: 'account_tokens', status: 202, send: (u) => t.http().post('/v1/auth/magic-link').set('X-API-Key', key).set('X-Forwarded-For', randomIp()).send({ email: u.email }).then((r) => r) },
    { name: 'email sign-in code', table: 'email_otp_codes', status: 202, send: (u) => t.http().post('/v1/auth/email-otp').set('X-API-Key', key).set('X-Forwarded-For', randomIp()).send({ email: u.email }).then((r) => r) },
  ];

  it.each(cases.map((c) => [c.name, c] as const))('%s in flight when the erasure arrives: the erasure waits for it, then removes what it wrote (never 5xx)', async (_name, c) => {
    const u = await register();
    // the request is stopped inside its write (the user's row locked) until the erasure has
    // arrived and waits for it
    const gate = await gateWrites(t.db, c.table, 'INSERT', `NEW.user_id = '${u.id}'`);
    try {
      const pending = c.send(u);
      const writing = await gate.reached();
      const erasure = erase(u.id).then((r) => r);
      await gate.waitedOnBy(writing);
      await gate.open();
      expect((await pending).status).toBe(c.status);
      expect((await erasure).status).toBe(204);
      expect(Number(await rowsNaming(u.id))).toBe(0);
    } finally {
      await gate.release();
    }
  });

  it('after the erasure committed, the same requests answer as for an unknown address (202, nothing written, no mail) or 401 for the bearer', async () => {
    const u = await register();
    await erase(u.id).expect(204);
    const mails = async () => Number((await t.db.query<{ n: string }>(`SELECT count(*) AS n FROM outbox WHERE topic = 'email' AND payload->>'to' = $1`, [u.email]))[0]?.n ?? 0);
    const before = await mails();
    const setup = await cases[0].send(u);
    expect(setup.status).toBe(401);
    for (const c of cases.slice(1)) expect((await c.send(u)).status).toBe(202);
    expect(Number(await rowsNaming(u.id))).toBe(0);
    expect(await mails()).toBe(before);
  });
});

/**
 * The same under mfa_policy required, grace over: sign-in and refresh answer 403
 * mfa/enrollment_required with an enrollment-only token, whose grant (an mfa_challenges row)
 * names the user. An erasure committed before the grant is written leaves 401 (as for an unknown
 * account, or a dead refresh token); one arriving while it is written waits and removes it.
 */
describe('user erasure racing a sign-in or refresh refused for MFA enrollment', () => {
  let t: TestApp;
  let owner: DashboardFixture;
  let key: string;
  beforeAll(async () => {
    t = await createTestApp();
    owner = await signupTenant(t);
    key = (await createApiKey(t, owner)).key;
    await t.db.query(`UPDATE tenants SET mfa_policy = 'required', mfa_grace_period_days = 3, mfa_required_since = now() - interval '10 days' WHERE id = $1`, [owner.tenantId]);
    await t.tenantChanged(owner.tenantId);
  });
  afterAll(() => t.close());

  /** A user past the grace, with a refresh token of a session started before it ended. */
  const lockedOut = async () => {
    const email = uniqueEmail('enforced');
    const res = await t.http().post('/v1/auth/register').set('X-API-Key', key).set('X-Forwarded-For', randomIp()).send({ email, password: STRONG_PASSWORD, consent: true }).expect(201);
    const id = res.body.user.id as string;
    await t.db.query(`UPDATE users SET created_at = now() - interval '60 days' WHERE id = $1`, [id]);
    return { id, email, refresh: res.body.refresh_token as string };
  };
  const erase = (userId: string) => t.http().delete(`/v1/auth/dashboard/tenants/${owner.slug}/users/${userId}`).set('Cookie', owner.cookie).set('X-CSRF-Token', owner.csrf);
  const login = (email: string) => t.http().post('/v1/auth/login').set('X-API-Key', key).set('X-Forwarded-For', randomIp()).send({ email, password: STRONG_PASSWORD }).then((r) => r);
  const refresh = (rt: string) => t.http().post('/v1/auth/refresh').set('X-API-Key', key).set('X-Forwarded-For', randomIp()).send({ refresh_token: rt }).then((r) => r);

  /** Erases the user inside the request, once its enrollment-only token is being signed (the user was read). */
  async function erasedWhileSigning<T>(userId: string, request: () => Promise<T>): Promise<T> {
    const jwt = t.app.get(JwtService);
    const sign = jwt.sign.bind(jwt);
    let erased = false;
    const spy = jest.spyOn(jwt, 'sign').mockImplementation(async (...args: Parameters<JwtService['sign']>) => {
      if (args[0].mfa_enrollment_only && args[0].sub === userId && !erased) {
        erased = true;
        expect((await erase(userId)).status).toBe(204);
      }
      return sign(...args);
    });
    try {
      const res = await request();
      expect(erased).toBe(true);
      return res;
    } finally {
      spy.mockRestore();
    }
  }

  it('erased once the user was read, before the grant is written: sign-in 401 auth/invalid_credentials, refresh 401 auth/invalid_refresh_token (never 5xx)', async () => {
    const a = await lockedOut();
    const signIn = await erasedWhileSigning(a.id, () => login(a.email));
    expect([signIn.status, signIn.body.code]).toEqual([401, 'auth/invalid_credentials']);
    const b = await lockedOut();
    const refreshed = await erasedWhileSigning(b.id, () => refresh(b.refresh));
    expect([refreshed.status, refreshed.body.code]).toEqual([401, 'auth/invalid_refresh_token']);
    expect(await t.db.query(`SELECT 1 FROM mfa_challenges WHERE user_id = ANY($1::uuid[])`, [[a.id, b.id]])).toHaveLength(0);
  });

  it('an erasure arriving while the grant is written waits for it, then removes it: the enrollment-only token answered is dead', async () => {
    const u = await lockedOut();
    const gate = await gateWrites(t.db, 'mfa_challenges', 'INSERT', `NEW.user_id = '${u.id}'`);
    let signIn, erasure;
    try {
      const pending = login(u.email);
      const writing = await gate.reached();
      const erasing = erase(u.id).then((r) => r);
      await gate.waitedOnBy(writing);
      await gate.open();
      [signIn, erasure] = await Promise.all([pending, erasing]);
    } finally {
      await gate.release();
    }
    expect([signIn.status, signIn.body.code, erasure.status]).toEqual([403, 'mfa/enrollment_required', 204]);
    expect(await t.db.query(`SELECT 1 FROM mfa_challenges WHERE user_id = $1`, [u.id])).toHaveLength(0);
    await t.http().post('/v1/auth/mfa/totp/setup').set('Authorization', `Bearer ${signIn.body.enrollment_token}`).set('X-Forwarded-For', randomIp()).expect(401);
  });
});
