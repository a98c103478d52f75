import { uniqueEmail } from '../../setup/app';
import { UserProfileCache } from '../../../src/shared/cache/user-profile.cache';
import { bearerPost, linkToken, mailCode, MailWorld, post, register, startMailWorld, TenantWithKey, tenantWithKey } from '../account-security/account-security.helpers';

/**
 * Found by a mutation review: properties the code states and no test checked (each mutant passed the
 * whole account-security suite):
 * - VerifyEmailOtpHandler: "an account is created here: the tenant's address policy of now
 *   applies (it may have changed since the request)";
 * - PasswordlessSignIn.proveEmail: "a token or code for an address the user no longer has proves
 *   nothing" (the verification link has this test; the magic link had none);
 * - CompleteStepUpHandler: a step-up link is bound to the address it was mailed to;
 * - ResetPasswordHandler: a reset link is bound to the address it was mailed to.
 * The address is moved in the database as the verification-link test does (no API changes an
 * account's address today, so the last three are defence in depth).
 */
describe('passwordless proofs are bound to the policy and the address of now', () => {
  let w: MailWorld;
  let tenant: TenantWithKey;
  beforeAll(async () => {
    w = await startMailWorld();
    tenant = await tenantWithKey(w.t, { email_otp_enabled: true, magic_link_enabled: true });
  }, 60_000);
  afterAll(() => w?.close());

  it('a login_or_create code for a domain the tenant blocked after the request creates no account (422 email/domain_blocked)', async () => {
    const email = uniqueEmail('later').replace(/@.*/, '@later-blocked.example');
    await post(w.t, '/v1/auth/email-otp', tenant.apiKey, { email, mode: 'login_or_create' }).expect(202);
    const code = mailCode(await w.nextMail((m) => m.to.includes(email) && m.subject.endsWith('verification code')));
    await w.t
      .http()
      .put(`/v1/auth/dashboard/tenants/${tenant.slug}/settings/email-domains`)
      .set('Cookie', tenant.cookie)
      .set('X-CSRF-Token', tenant.csrf)
      .send({ blocklist: ['later-blocked.example'] })
      .expect(200);
    const res = await post(w.t, '/v1/auth/email-otp/verify', tenant.apiKey, { email, code });
    expect(res.status).toBe(422);
    expect(res.body.code).toBe('email/domain_blocked');
    expect(await w.t.db.query(`SELECT 1 FROM users WHERE tenant_id = $1 AND email_normalized = $2`, [tenant.tenantId, email])).toHaveLength(0);
  });

  it('a sign-in magic link for an address the user no longer has signs nobody in', async () => {
    const u = await register(w.t, tenant.apiKey);
    await post(w.t, '/v1/auth/magic-link', tenant.apiKey, { email: u.email }).expect(202);
    const token = linkToken(await w.nextMail((m) => m.to.includes(u.email) && m.subject.startsWith('Your sign-in link')), '/magic-link');
    const moved = uniqueEmail('moved');
    await w.t.db.query(`UPDATE users SET email = $2, email_normalized = $2 WHERE id = $1`, [u.id, moved]);
    expect((await post(w.t, '/v1/auth/magic-link/verify', tenant.apiKey, { token }).expect(400)).body.code).toBe('token/invalid');
    const [row] = await w.t.db.query<{ email_verified: boolean }>(`SELECT email_verified FROM users WHERE id = $1`, [u.id]);
    expect(row.email_verified).toBe(false);
  });

  it('a step-up link for an address the account no longer has steps nothing up', async () => {
    const u = await register(w.t, tenant.apiKey);
    await bearerPost(w.t, '/v1/auth/step-up/magic-link', u.access, {}).expect(202);
    const token = linkToken(await w.nextMail((m) => m.to.includes(u.email) && m.subject.startsWith('Confirm it is you')), '/step-up/magic-link');
    const moved = uniqueEmail('moved-stepup');
    await w.t.db.query(`UPDATE users SET email = $2, email_normalized = $2 WHERE id = $1`, [u.id, moved]);
    await w.t.app.get(UserProfileCache).invalidate([u.id]);
    expect((await bearerPost(w.t, '/v1/auth/step-up/magic-link/verify', u.access, { token }).expect(400)).body.code).toBe('token/invalid');
  });
  it('a password reset link for an address the account no longer has changes nothing', async () => {
    const u = await register(w.t, tenant.apiKey);
    await post(w.t, '/v1/auth/password/forgot', tenant.apiKey, { email: u.email }).expect(202);
    const token = linkToken(await w.nextMail((m) => m.to.includes(u.email) && m.subject.startsWith('Reset your')), '/reset-password');
    const moved = uniqueEmail('moved-reset');
    await w.t.db.query(`UPDATE users SET email = $2, email_normalized = $2 WHERE id = $1`, [u.id, moved]);
    const [before] = await w.t.db.query<{ password_hash: string }>(`SELECT password_hash FROM users WHERE id = $1`, [u.id]);
    expect((await post(w.t, '/v1/auth/password/reset', tenant.apiKey, { token, password: 'a brand new passphrase 42' }).expect(400)).body.code).toBe('token/invalid');
    const [after] = await w.t.db.query<{ password_hash: string }>(`SELECT password_hash FROM users WHERE id = $1`, [u.id]);
    expect(after.password_hash).toBe(before.password_hash);
  });
});
