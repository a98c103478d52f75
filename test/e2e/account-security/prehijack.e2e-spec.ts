import * as crypto from 'crypto';
import { sessionCookie } from '../../factories/dashboard.factory';
import { randomIp, STRONG_PASSWORD, TestApp, uniqueEmail } from '../../setup/app';
import { linkToken, MailWorld, post, register, startMailWorld, tenantWithKey, TenantWithKey } from '../account-security/account-security.helpers';

/**
 * Pre-account hijacking (Sudhodanan and Paverd, USENIX Security 2022): the attacker acts before the
 * owner, with the owner's address but not the mailbox, and must keep nothing once the owner takes
 * the account over (a first passwordless sign-in, a password reset). Found by a review: a dashboard
 * reset left the invitations the squatter's session sent live, and a reset left the squatter's
 * client addresses known to the failed sign-in throttle.
 */
describe('pre-account hijacking: nothing the squatter set up outlives the owner taking the account over', () => {
  let w: MailWorld;
  let t: TestApp;
  let tenant: TenantWithKey;
  beforeAll(async () => {
    w = await startMailWorld();
    t = w.t;
    tenant = await tenantWithKey(t, { magic_link_enabled: true, email_otp_enabled: true });
    await t.db.query(`UPDATE tenants SET anonymous_signins_enabled = true, anonymous_ever_enabled = true WHERE id = $1`, [tenant.tenantId]);
  }, 60_000);
  afterAll(() => w.close());

  const NEW_PASSWORD = 'the victims own new passphrase';
  const dashForgot = (email: string) => t.http().post('/v1/auth/dashboard/password/forgot').set('X-Forwarded-For', randomIp()).send({ email });
  const dashReset = (token: string, password: string) => t.http().post('/v1/auth/dashboard/password/reset').set('X-Forwarded-For', randomIp()).send({ token, password });
  const accept = (token: string, password: string) => t.http().post('/v1/auth/dashboard/invites/accept').set('X-Forwarded-For', randomIp()).send({ token, password });

  async function magicLinkSignIn(email: string) {
    await post(t, '/v1/auth/magic-link', tenant.apiKey, { email }).expect(202);
    const token = linkToken(await w.nextMail((m) => m.to.includes(email) && m.subject.startsWith('Your sign-in link')), '/magic-link');
    return post(t, '/v1/auth/magic-link/verify', tenant.apiKey, { token });
  }

  // (4) dashboard: the squatter signs up victim@ (no mailbox proof), invites a second address of theirs
  // as owner and keeps the token the 201 answers; the victim takes the account over by reset (the only
  // way: signup answers 409 onboarding/email_exists); the invitation the squatter's session issued
  // before the reset still opens an owner membership afterwards.
  it('dashboard: an invitation issued before the owner reset the password is withdrawn by the reset', async () => {
    const victim = uniqueEmail('victim');
    const squatter = await t
      .http()
      .post('/v1/onboarding/signup')
      .set('X-Forwarded-For', randomIp())
      .send({ email: victim, password: STRONG_PASSWORD, tenant_name: 'Victim Corp', consent_terms: true, consent_privacy: true })
      .expect(201);
    const cookie = sessionCookie(squatter.headers['set-cookie']);
    const slug = squatter.body.tenant.slug as string;
    const attacker2 = uniqueEmail('attacker');
    const inv = await t
      .http()
      .post(`/v1/auth/dashboard/tenants/${slug}/members`)
      .set('Cookie', cookie)
      .set('X-CSRF-Token', squatter.body.csrf_token)
      .send({ email: attacker2, role: 'owner' })
      .expect(201);
    const inviteToken = inv.body.invite_token as string;

    // the victim arrives: signup refused, so a reset takes the account over
    const signup = await t
      .http()
      .post('/v1/onboarding/signup')
      .set('X-Forwarded-For', randomIp())
      .send({ email: victim, password: NEW_PASSWORD, tenant_name: 'Victim Real', consent_terms: true, consent_privacy: true });
    expect(signup.status).toBe(409);
    await dashForgot(victim).expect(202);
    const token = linkToken(await w.nextMail((m) => m.to.includes(victim) && m.subject.includes('Reset your dashboard password')), '/dashboard/reset-password');
    await dashReset(token, NEW_PASSWORD).expect(204);
    // the squatter's session is over (correct)
    await t.http().get('/v1/auth/dashboard/me').set('Cookie', cookie).expect(401);

    // and so is the invitation that session sent (its token went to whoever held it)
    const res = await accept(inviteToken, STRONG_PASSWORD);
    expect({ status: res.status, code: res.body.code, memberships: res.body.memberships }).toEqual({ status: 400, code: 'invite/invalid', memberships: undefined });
    const [audit] = await t.db.query<{ metadata: Record<string, unknown> }>(`SELECT metadata FROM audit_events WHERE type = 'dashboard.invite_revoked' AND tenant_id = $1`, [squatter.body.tenant.id]);
    expect(audit.metadata).toMatchObject({ role: 'owner', reason: 'password_reset' });
  });

  // (1) control: unexpired credentials of an end user are cleared by the first passwordless sign-in
  it('end user: squatter password, refresh token and access token die at the owner\'s first magic-link sign-in', async () => {
    const sq = await register(t, tenant.apiKey, uniqueEmail('victim'));
    const owner = await magicLinkSignIn(sq.email);
    expect(owner.status).toBe(200);
    await post(t, '/v1/auth/login', tenant.apiKey, { email: sq.email, password: sq.password }).expect(401);
    await t.http().get('/v1/auth/me').set('Authorization', `Bearer ${sq.access}`).expect(401);
    await post(t, '/v1/auth/refresh', tenant.apiKey, { refresh_token: sq.refresh }).expect(401);
  });

  // (3) control: a guest claimed to the victim's address is cleared the same way
  it('guest claim to victim@: the claimed session dies at the owner\'s first magic-link sign-in', async () => {
    const g = await post(t, '/v1/auth/anonymous', tenant.apiKey, {}).expect(201);
    const victim = uniqueEmail('victim');
    const claimed = await t
      .http()
      .post('/v1/auth/register')
      .set('X-Forwarded-For', randomIp())
      .set('X-API-Key', tenant.apiKey)
      .set('Authorization', `Bearer ${g.body.access_token}`)
      .send({ email: victim, password: STRONG_PASSWORD, consent: true })
      .expect(201);
    const owner = await magicLinkSignIn(victim);
    expect(owner.status).toBe(200);
    expect(owner.body.user.id).toBe(g.body.user.id);
    await post(t, '/v1/auth/login', tenant.apiKey, { email: victim, password: STRONG_PASSWORD }).expect(401);
    await t.http().get('/v1/auth/me').set('Authorization', `Bearer ${claimed.body.access_token}`).expect(401);
    await post(t, '/v1/auth/refresh', tenant.apiKey, { refresh_token: claimed.body.refresh_token }).expect(401);
  });
  // (1) unexpired state: the client addresses the squatter used stay "known" to the account after the
  // owner's takeover, so they keep the exemption from the account-wide failed sign-in limit
  it('end user: the squatter\'s address is no longer exempt from the account-wide limit after the owner took the account over', async () => {
    const squatterIp = randomIp();
    const email = uniqueEmail('victim');
    await post(t, '/v1/auth/register', tenant.apiKey, { email, password: STRONG_PASSWORD, consent: true }, squatterIp).expect(201);
    expect((await magicLinkSignIn(email)).status).toBe(200);
    // the owner sets a password by reset, as the README tells them to
    await post(t, '/v1/auth/password/forgot', tenant.apiKey, { email }).expect(202);
    const token = linkToken(await w.nextMail((m) => m.to.includes(email) && m.subject.startsWith('Reset your')), '/reset-password');
    await post(t, '/v1/auth/password/reset', tenant.apiKey, { token, password: NEW_PASSWORD }).expect(204);
    const small = await w.extraApp({ LOGIN_FAILURES_PER_ACCOUNT: '6' });
    // someone trips the account-wide limit from addresses the account does not know
    for (let i = 0; i < 3; i++) {
      const ip = randomIp();
      for (let j = 0; j < 2; j++) await post(small, '/v1/auth/login', tenant.apiKey, { email, password: `wrong guess ${i}-${j} xx` }, ip).expect(401);
    }
    expect((await post(small, '/v1/auth/login', tenant.apiKey, { email, password: 'another wrong guess' }).expect(429)).body.code).toBe('auth/login_throttled');
    // the squatter's registration address is refused as any stranger's
    const res = await post(small, '/v1/auth/login', tenant.apiKey, { email, password: 'squatter guess one' }, squatterIp);
    expect(res.status).toBe(429);
  });
  // (4) control: the squatter's signup idempotency key does not reopen a session after the reset
  it('dashboard: replaying the squatter\'s signup (same key, old password) after the owner\'s reset opens no session', async () => {
    const victim = uniqueEmail('victim');
    const body = { email: victim, password: STRONG_PASSWORD, tenant_name: 'Victim Two', consent_terms: true, consent_privacy: true, idempotency_key: `${crypto.randomUUID()}` };
    await t.http().post('/v1/onboarding/signup').set('X-Forwarded-For', randomIp()).send(body).expect(201);
    await dashForgot(victim).expect(202);
    const token = linkToken(await w.nextMail((m) => m.to.includes(victim) && m.subject.includes('Reset your dashboard password')), '/dashboard/reset-password');
    await dashReset(token, NEW_PASSWORD).expect(204);
    const replay = await t.http().post('/v1/onboarding/signup').set('X-Forwarded-For', randomIp()).send(body);
    expect(replay.status).toBe(409);
    expect(replay.headers['set-cookie']).toBeUndefined();
  });
});
