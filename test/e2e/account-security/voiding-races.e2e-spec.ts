import { authenticator } from 'otplib';
import request from 'supertest';
import { randomIp } from '../../setup/app';
import { gateWrites } from '../../setup/hold-writes';
import { bearerPost, linkToken, mailCode, MailWorld, patchSecurity, post, register, startMailWorld, TenantWithKey, tenantWithKey } from './account-security.helpers';

const REDIRECT = 'https://app.example.test/callback';

/**
 * What ends the sign-ins under way (a revocation of the OAuth client their authorization request
 * names; the tenant switching magic links or email codes off) also ends the one whose link, code
 * or MFA challenge is being written at that moment: the writer re-reads the client and the switch
 * under share locks in its transaction, so the revocation or switch-off waits for it and voids
 * what it wrote (or the writer sees the change first and writes nothing). Each test holds the
 * row's INSERT at a gate, sees the revocation or PATCH blocked on the writer, then opens the gate.
 */
describe('sign-ins under way end with a revocation or switch-off committed while their row is written', () => {
  let w: MailWorld;
  let tenant: TenantWithKey;

  beforeAll(async () => {
    w = await startMailWorld();
    tenant = await tenantWithKey(w.t, { magic_link_enabled: true, email_otp_enabled: true });
  }, 60_000);
  afterAll(() => w?.close());

  const createClient = async () =>
    (
      await w.t
        .http()
        .post(`/v1/auth/dashboard/tenants/${tenant.slug}/oauth-clients`)
        .set('Cookie', tenant.cookie)
        .set('X-CSRF-Token', tenant.csrf)
        .send({ name: 'web', client_type: 'public', redirect_uris: [REDIRECT] })
        .expect(201)
    ).body.client_id as string;
  const revoke = (id: string) =>
    w.t.http().delete(`/v1/auth/dashboard/tenants/${tenant.slug}/oauth-clients/${id}`).set('Cookie', tenant.cookie).set('X-CSRF-Token', tenant.csrf);
  const params = (clientId: string) => ({ client_id: clientId, redirect_uri: REDIRECT, state: 's1' });

  /**
   * `write` runs into the gate on `table`; `change` (a revocation or a PATCH) must then wait for it.
   * Answers both responses once the gate has opened.
   */
  async function raced(table: string, when: string, write: () => Promise<request.Response>, change: () => Promise<request.Response>) {
    const gate = await gateWrites(w.t.db, table, 'INSERT', when);
    try {
      const writing = write();
      const pid = await gate.reached();
      const changing = change();
      // the revocation or switch-off waits for the writer's share lock (without it, it committed here)
      await gate.waitedOnBy(pid);
      await gate.open();
      return await Promise.all([writing, changing]);
    } finally {
      await gate.release();
    }
  }

  it("magic link: the link being written when its client is revoked is void (400), not a sign-in answering the revoked client's oauth_params", async () => {
    const doomed = await createClient();
    const u = await register(w.t, tenant.apiKey);
    const [asked, revoked] = await raced(
      'account_tokens',
      `NEW.oauth_params->>'client_id' = '${doomed}'`,
      () => post(w.t, '/v1/auth/magic-link', tenant.apiKey, { email: u.email, oauth_params: params(doomed) }, randomIp()).then((r) => r),
      () => revoke(doomed).then((r) => r),
    );
    expect([asked.status, revoked.status]).toEqual([202, 200]);
    const token = linkToken(await w.nextMail((m) => m.to.includes(u.email) && m.subject.startsWith('Your sign-in link')), '/magic-link');
    const res = await post(w.t, '/v1/auth/magic-link/verify', tenant.apiKey, { token });
    expect({ status: res.status, oauth_params: res.body.oauth_params }).toEqual({ status: 400, oauth_params: undefined });
  });

  it('email code: the code being written when its client is revoked is void (401)', async () => {
    const doomed = await createClient();
    const u = await register(w.t, tenant.apiKey);
    const [asked, revoked] = await raced(
      'email_otp_codes',
      `NEW.oauth_params->>'client_id' = '${doomed}'`,
      () => post(w.t, '/v1/auth/email-otp', tenant.apiKey, { email: u.email, oauth_params: params(doomed) }, randomIp()).then((r) => r),
      () => revoke(doomed).then((r) => r),
    );
    expect([asked.status, revoked.status]).toEqual([202, 200]);
    const code = mailCode(await w.nextMail((m) => m.to.includes(u.email) && m.subject.endsWith('verification code')));
    const res = await post(w.t, '/v1/auth/email-otp/verify', tenant.apiKey, { email: u.email, code });
    expect({ status: res.status, oauth_params: res.body.oauth_params }).toEqual({ status: 401, oauth_params: undefined });
  });

  it('MFA user: the challenge being written (after the link was used) when the client is revoked is void: mfa/verify answers 401, no tokens', async () => {
    const doomed = await createClient();
    const u = await register(w.t, tenant.apiKey);
    await w.t.db.query(`UPDATE users SET email_verified = true WHERE id = $1`, [u.id]);
    const setup = await bearerPost(w.t, '/v1/auth/mfa/totp/setup', u.access, {}).expect(200);
    const enabled = await bearerPost(w.t, '/v1/auth/mfa/totp/verify-setup', u.access, { code: authenticator.generate(setup.body.secret) }).expect(200);
    await post(w.t, '/v1/auth/magic-link', tenant.apiKey, { email: u.email, oauth_params: params(doomed) }).expect(202);
    const token = linkToken(await w.nextMail((m) => m.to.includes(u.email) && m.subject.startsWith('Your sign-in link')), '/magic-link');
    const [used, revoked] = await raced(
      'mfa_challenges',
      `NEW.oauth_params->>'client_id' = '${doomed}'`,
      () => post(w.t, '/v1/auth/magic-link/verify', tenant.apiKey, { token }).then((r) => r),
      () => revoke(doomed).then((r) => r),
    );
    expect([used.status, revoked.status]).toEqual([200, 200]);
    const done = await post(w.t, '/v1/auth/mfa/verify', tenant.apiKey, { mfa_challenge_token: used.body.mfa_challenge_token, code: enabled.body.recovery_codes[0] });
    expect({ status: done.status, code: done.body.code, oauth_params: done.body.oauth_params }).toEqual({ status: 401, code: 'mfa/invalid_challenge', oauth_params: undefined });
  });

  it('magic links switched off while a link is written: the link is void, also once they are switched on again', async () => {
    const u = await register(w.t, tenant.apiKey);
    const [asked, switched] = await raced(
      'account_tokens',
      `NEW.kind = 'magic_link' AND NEW.user_id = '${u.id}'`,
      () => post(w.t, '/v1/auth/magic-link', tenant.apiKey, { email: u.email }, randomIp()).then((r) => r),
      () => patchSecurity(w.t, tenant, { magic_link_enabled: false }).then((r) => r),
    );
    expect([asked.status, switched.status]).toEqual([202, 200]);
    const token = linkToken(await w.nextMail((m) => m.to.includes(u.email) && m.subject.startsWith('Your sign-in link')), '/magic-link');
    await patchSecurity(w.t, tenant, { magic_link_enabled: true }).expect(200);
    expect((await post(w.t, '/v1/auth/magic-link/verify', tenant.apiKey, { token })).status).toBe(400);
  });

  it('email codes switched off while a code is written: the code is void, also once they are switched on again', async () => {
    const u = await register(w.t, tenant.apiKey);
    const [asked, switched] = await raced(
      'email_otp_codes',
      `NEW.purpose = 'login' AND NEW.user_id = '${u.id}'`,
      () => post(w.t, '/v1/auth/email-otp', tenant.apiKey, { email: u.email }, randomIp()).then((r) => r),
      () => patchSecurity(w.t, tenant, { email_otp_enabled: false }).then((r) => r),
    );
    expect([asked.status, switched.status]).toEqual([202, 200]);
    const code = mailCode(await w.nextMail((m) => m.to.includes(u.email) && m.subject.endsWith('verification code')));
    await patchSecurity(w.t, tenant, { email_otp_enabled: true }).expect(200);
    expect((await post(w.t, '/v1/auth/email-otp/verify', tenant.apiKey, { email: u.email, code })).status).toBe(401);
  });

  it('a step-up link being written when magic links are switched off is void, also once they are switched on again', async () => {
    const u = await register(w.t, tenant.apiKey);
    const [asked, switched] = await raced(
      'account_tokens',
      `NEW.kind = 'step_up_magic_link' AND NEW.user_id = '${u.id}'`,
      () => bearerPost(w.t, '/v1/auth/step-up/magic-link', u.access, {}).then((r) => r),
      () => patchSecurity(w.t, tenant, { magic_link_enabled: false }).then((r) => r),
    );
    expect([asked.status, switched.status]).toEqual([202, 200]);
    const token = linkToken(await w.nextMail((m) => m.to.includes(u.email) && m.subject.startsWith('Confirm it is you')), '/step-up/magic-link');
    await patchSecurity(w.t, tenant, { magic_link_enabled: true }).expect(200);
    expect((await bearerPost(w.t, '/v1/auth/step-up/magic-link/verify', u.access, { token })).status).toBe(400);
  });
});
