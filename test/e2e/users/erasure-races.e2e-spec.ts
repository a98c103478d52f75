import { createApiKey, sessionCookie, signupTenant } from '../../factories/dashboard.factory';
import { createTestApp, randomIp, STRONG_PASSWORD, TestApp, uniqueEmail } from '../../setup/app';
import { addMember, as, throttleState } from '../agents/agents.helpers';
import { normalizeEmail } from '../../../src/modules/users/email';
import { PasswordHasher } from '../../../src/shared/crypto/password-hasher';
import { passwordSignInRealm } from '../../../src/shared/rate-limit/login-throttle.service';

/**
 * Erasures (an end user's, a dashboard account's) leave nothing that names the erased address, and
 * a password sign-in racing one records no known client address after it (the throttle's erased
 * mark): a new account of the address inherits nothing.
 */
describe('erasure: what is left of the address, and sign-ins racing it', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp({ RATE_LIMIT_SIGNUP_PER_MIN: '25' });
  });
  afterAll(() => t.close());

  /** Holds the next password check (argon2) until `release`: `inVerify` resolves once a sign-in is inside it. */
  const holdPasswordCheck = () => {
    const hasher = t.app.get(PasswordHasher);
    let entered!: () => void;
    const inVerify = new Promise<void>((r) => (entered = r));
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const real = hasher.verifyOrDummy.bind(hasher);
    const spy = jest.spyOn(hasher, 'verifyOrDummy').mockImplementationOnce(async (h, p) => {
      entered();
      await gate;
      return real(h, p);
    });
    return { inVerify, release, spy };
  };

  it("DELETE /v1/auth/dashboard/me leaves no row holding the erased address (invitations it accepted, mails queued to it) but another tenant's pending invitation and its mail", async () => {
    const a = await signupTenant(t);
    const u = await addMember(t, a, 'member'); // accepted an invitation: the row keeps the address
    await t.http().post('/v1/auth/dashboard/password/forgot').set('X-Forwarded-For', randomIp()).send({ email: u.email }).expect(202);
    // a tenant the account never joined invites the address: that invitation is the other tenant's
    const other = await signupTenant(t);
    await as(t, other).post(`/v1/auth/dashboard/tenants/${other.slug}/members`, { email: u.email, role: 'member' }).expect(201);
    await as(t, u).delete('/v1/auth/dashboard/me').expect(204);
    const norm = normalizeEmail(u.email);
    const invites = await t.db.query(`SELECT tenant_id, accepted_at IS NOT NULL AS accepted FROM dashboard_invites WHERE email_normalized = $1`, [norm]);
    const mails = await t.db.query(`SELECT event_type, tenant_id FROM outbox WHERE payload->>'to' = $1 AND processed_at IS NULL`, [u.email]);
    expect({ invites, mails }).toEqual({ invites: [{ tenant_id: other.tenantId, accepted: false }], mails: [{ event_type: 'email.dashboard_invite', tenant_id: other.tenantId }] });
    const [audit] = await t.db.query<{ metadata: { unsent_mails_dropped: number } }>(`SELECT metadata FROM audit_events WHERE type = 'dashboard.account_deleted' AND actor_id = $1`, [u.userId]);
    expect(audit.metadata.unsent_mails_dropped).toBe(2);
  });

  it('an end user erasure: a password sign-in that proved the password as the erasure committed records no known client address after it', async () => {
    const d = await signupTenant(t);
    const key = await createApiKey(t, d);
    const email = uniqueEmail('victim');
    const reg = await t.http().post('/v1/auth/register').set('X-API-Key', key.key).set('X-Forwarded-For', randomIp()).send({ email, password: STRONG_PASSWORD, consent: true }).expect(201);
    const userId = reg.body.user.id as string;

    const { inVerify, release, spy } = holdPasswordCheck();
    const login = t.http().post('/v1/auth/login').set('X-API-Key', key.key).set('X-Forwarded-For', randomIp()).send({ email, password: STRONG_PASSWORD }).then((r) => r);
    await inVerify;
    await t.http().delete(`/v1/auth/dashboard/tenants/${d.slug}/users/${userId}`).set('Cookie', d.cookie).set('X-CSRF-Token', d.csrf).expect(204);
    expect(await throttleState(passwordSignInRealm(d.tenantId), normalizeEmail(email))).toEqual({ known: 0, failures: 0 });
    release();
    expect((await login).status).toBe(401);
    spy.mockRestore();
    // the erasure claims a new account of the address inherits none of the throttle's state
    expect(await throttleState(passwordSignInRealm(d.tenantId), normalizeEmail(email))).toEqual({ known: 0, failures: 0 });
  });

  it('DELETE /v1/auth/dashboard/me: a dashboard sign-in that proved the password as the erasure committed records no known client address after it', async () => {
    const a = await signupTenant(t);
    const u = await addMember(t, a, 'member');
    const { inVerify, release, spy } = holdPasswordCheck();
    const ip = randomIp();
    const login = t.http().post('/v1/auth/dashboard/login').set('X-Forwarded-For', ip).send({ email: u.email, password: STRONG_PASSWORD }).then((r) => r);
    await inVerify;
    await as(t, u).delete('/v1/auth/dashboard/me').expect(204);
    expect(await throttleState('dashboard', normalizeEmail(u.email))).toEqual({ known: 0, failures: 0 });
    release();
    expect((await login).status).toBe(401);
    spy.mockRestore();
    expect(await throttleState('dashboard', normalizeEmail(u.email))).toEqual({ known: 0, failures: 0 });
  });

  it("DELETE /v1/auth/dashboard/me keeps another tenant's unsent end-user mails to the same address (they are that tenant's, not the dashboard account's)", async () => {
    // tenant B has an end user whose address is also a dashboard account elsewhere
    const b = await signupTenant(t);
    const { key } = await createApiKey(t, b);
    const a = await signupTenant(t);
    const u = await addMember(t, a, 'member');
    await t.http().post('/v1/auth/register').set('X-API-Key', key).set('X-Forwarded-For', randomIp()).send({ email: u.email, password: STRONG_PASSWORD, consent: true }).expect(201);
    await t.http().post('/v1/auth/password/forgot').set('X-API-Key', key).set('X-Forwarded-For', randomIp()).send({ email: u.email }).expect(202);
    const before = await t.db.query(`SELECT event_type FROM outbox WHERE tenant_id = $1 AND payload->>'to' = $2 AND processed_at IS NULL ORDER BY id`, [b.tenantId, u.email]);
    expect(before.length).toBeGreaterThan(0);
    await as(t, u).delete('/v1/auth/dashboard/me').expect(204);
    const after = await t.db.query(`SELECT event_type FROM outbox WHERE tenant_id = $1 AND payload->>'to' = $2 AND processed_at IS NULL ORDER BY id`, [b.tenantId, u.email]);
    expect(after).toEqual(before);
  });

  it("an inviter who accepts its own invitation of someone else's address (the token is in the 201) and erases that account drops none of the address's end-user mails", async () => {
    const victimTenant = await signupTenant(t);
    const { key } = await createApiKey(t, victimTenant);
    const victim = uniqueEmail('victim');
    await t.http().post('/v1/auth/register').set('X-API-Key', key).set('X-Forwarded-For', randomIp()).send({ email: victim, password: STRONG_PASSWORD, consent: true }).expect(201);
    await t.http().post('/v1/auth/password/forgot').set('X-API-Key', key).set('X-Forwarded-For', randomIp()).send({ email: victim }).expect(202);
    const before = await t.db.query(`SELECT event_type FROM outbox WHERE tenant_id = $1 AND payload->>'to' = $2 AND processed_at IS NULL ORDER BY id`, [victimTenant.tenantId, victim]);
    expect(before.length).toBeGreaterThan(0);

    const attacker = await signupTenant(t);
    const inv = await as(t, attacker).post(`/v1/auth/dashboard/tenants/${attacker.slug}/members`, { email: victim, role: 'member' }).expect(201);
    const acc = await t.http().post('/v1/auth/dashboard/invites/accept').send({ token: inv.body.invite_token, password: STRONG_PASSWORD }).expect(200);
    const planted = { slug: attacker.slug, tenantId: attacker.tenantId, userId: acc.body.user.id, email: victim, cookie: sessionCookie(acc.headers['set-cookie']), csrf: acc.body.csrf_token };
    await as(t, planted).delete('/v1/auth/dashboard/me').expect(204);
    const after = await t.db.query(`SELECT event_type FROM outbox WHERE tenant_id = $1 AND payload->>'to' = $2 AND processed_at IS NULL ORDER BY id`, [victimTenant.tenantId, victim]);
    expect(after).toEqual(before);
  });

  it("an end user's erasure keeps the tenant's pending dashboard invitation mail to the same address (it is a dashboard mail, not the end user's)", async () => {
    const d = await signupTenant(t);
    const { key } = await createApiKey(t, d);
    const email = uniqueEmail('both');
    const reg = await t.http().post('/v1/auth/register').set('X-API-Key', key).set('X-Forwarded-For', randomIp()).send({ email, password: STRONG_PASSWORD, consent: true }).expect(201);
    await as(t, d).post(`/v1/auth/dashboard/tenants/${d.slug}/members`, { email, role: 'member' }).expect(201);
    const mails = () => t.db.query(`SELECT event_type FROM outbox WHERE payload->>'to' = $1 AND processed_at IS NULL AND event_type = 'email.dashboard_invite'`, [email]);
    expect(await mails()).toHaveLength(1);
    await t.http().delete(`/v1/auth/dashboard/tenants/${d.slug}/users/${reg.body.user.id}`).set('Cookie', d.cookie).set('X-CSRF-Token', d.csrf).expect(204);
    const [inv] = await t.db.query(`SELECT accepted_at FROM dashboard_invites WHERE tenant_id = $1 AND email_normalized = lower($2)`, [d.tenantId, email]);
    expect(inv).toBeDefined(); // the invitation is still pending...
    expect(await mails()).toHaveLength(1); // ...and so is its mail
  });
});
