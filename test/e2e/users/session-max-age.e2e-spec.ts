import { createTestApp, randomIp, STRONG_PASSWORD, TestApp, uniqueEmail } from '../../setup/app';
import { EnvelopeCipher } from '../../../src/shared/crypto/envelope-cipher';
import { createAgent } from '../../factories/agent.factory';
import { createTenant, TenantFixture } from '../../factories/tenant.factory';
import { exchangeBody, postToken } from '../oauth/oauth-helpers';

const claims = (token: string): Record<string, unknown> => JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString());
const MAX_AGE = 3600;

/**
 * SESSION_MAX_AGE_SECONDS: an end user's session refreshes until that long after the user last
 * signed in (auth_time), then ends and the user signs in again; guests are exempt (they cannot
 * sign in again); 0 (the default) sets no limit.
 */
describe('sessions: absolute lifetime (SESSION_MAX_AGE_SECONDS)', () => {
  let t: TestApp;
  let unlimited: TestApp;
  let tenant: TenantFixture;
  beforeAll(async () => {
    t = await createTestApp({ SESSION_MAX_AGE_SECONDS: String(MAX_AGE) });
    unlimited = await createTestApp();
    tenant = await createTenant(t.db, { anonymous_signins_enabled: true, tier: 'pro' });
    await t.db.query(`UPDATE tenants SET email_otp_enabled = true, magic_link_enabled = true WHERE id = $1`, [tenant.id]);
  });
  afterAll(async () => {
    await t.close();
    await unlimited.close();
  });

  const post = (app: TestApp, path: string, body: object, bearer?: string) => {
    const req = app.http().post(path).set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', randomIp());
    if (bearer) req.set('Authorization', `Bearer ${bearer}`);
    return req.send(body);
  };
  const refresh = (app: TestApp, token: string) => post(app, '/v1/auth/refresh', { refresh_token: token });
  /** Moves the session's sign-in `seconds` back. */
  const age = (accessToken: string, seconds: number) =>
    t.db.query(`UPDATE user_sessions SET created_at = created_at - make_interval(secs => $2), authenticated_at = authenticated_at - make_interval(secs => $2) WHERE id = $1`, [
      claims(accessToken).sid,
      seconds,
    ]);
  const sessionRow = async (accessToken: string) =>
    (await t.db.query<{ revoked_at: Date | null; revoked_reason: string | null }>(`SELECT revoked_at, revoked_reason FROM user_sessions WHERE id = $1`, [claims(accessToken).sid]))[0];

  it('refreshes until the maximum age since sign-in, then ends the session: the user signs in again', async () => {
    const email = uniqueEmail('maxage');
    const reg = await post(t, '/v1/auth/register', { email, password: STRONG_PASSWORD, consent: true }).expect(201);
    await age(reg.body.access_token, MAX_AGE - 120);
    const r1 = await refresh(t, reg.body.refresh_token).expect(200);

    await age(reg.body.access_token, 240);
    const over = await refresh(t, r1.body.refresh_token).expect(401);
    expect(over.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(over.body).toMatchObject({ code: 'auth/invalid_refresh_token', detail: expect.stringMatching(/maximum age/) });
    expect(await sessionRow(reg.body.access_token)).toMatchObject({ revoked_at: expect.any(Date), revoked_reason: 'max_age' });
    const sid = claims(reg.body.access_token).sid;
    expect(await t.db.query(`SELECT severity, metadata FROM audit_events WHERE type = 'user.session_ended' AND target_id = $1`, [sid])).toEqual([
      { severity: 'info', metadata: { user_id: reg.body.user.id, reason: 'max_age' } },
    ]);
    // nothing was issued: the token was not rotated and no child exists
    expect(await t.db.query(`SELECT 1 FROM refresh_tokens WHERE parent_id = $1`, [r1.body.refresh_token.split(':')[0]])).toHaveLength(0);
    // the session's access tokens are refused from now on, as for any ended session
    await t.http().get('/v1/auth/me').set('Authorization', `Bearer ${r1.body.access_token}`).expect(401);
    // and presenting the token again is still a plain refusal
    await refresh(t, r1.body.refresh_token).expect(401);

    // a new sign-in is a new session with its own clock
    const login = await post(t, '/v1/auth/login', { email, password: STRONG_PASSWORD }).expect(200);
    await refresh(t, login.body.refresh_token).expect(200);
  });

  it('parallel refreshes of one session past its age: none gets tokens', async () => {
    const reg = await post(t, '/v1/auth/register', { email: uniqueEmail('maxage-par'), password: STRONG_PASSWORD, consent: true }).expect(201);
    await age(reg.body.access_token, MAX_AGE + 60);
    const results = await Promise.all(Array.from({ length: 5 }, () => refresh(t, reg.body.refresh_token)));
    expect(results.map((r) => r.status)).toEqual([401, 401, 401, 401, 401]);
    expect(await t.db.query(`SELECT 1 FROM refresh_tokens WHERE parent_id = $1`, [reg.body.refresh_token.split(':')[0]])).toHaveLength(0);
  });

  it('a guest is exempt; a claim is a sign-in and starts the clock', async () => {
    const guest = await post(t, '/v1/auth/anonymous', {}).expect(201);
    await age(guest.body.access_token, 10 * MAX_AGE);
    const g1 = await refresh(t, guest.body.refresh_token).expect(200);
    expect(claims(g1.body.access_token).is_anonymous).toBe(true);

    const claimed = await post(t, '/v1/auth/register', { email: uniqueEmail('maxage-claim'), password: STRONG_PASSWORD, consent: true }, g1.body.access_token).expect(201);
    expect(claimed.body.user.id).toBe(guest.body.user.id);
    await refresh(t, claimed.body.refresh_token).expect(200);
  });

  /** The secret (code or link token) of the newest mail queued to `email`, as the mail worker would read it. */
  const mailedSecret = async (email: string): Promise<{ code?: string; token?: string }> => {
    const [m] = await t.db.query<{ secret_enc: string }>(`SELECT secret_enc FROM outbox WHERE topic = 'email' AND payload->>'to' = $1 ORDER BY id DESC LIMIT 1`, [email]);
    return JSON.parse(t.app.get(EnvelopeCipher).decryptString(m.secret_enc));
  };
  const outboxRows = async () => (await t.db.query(`SELECT 1 FROM outbox WHERE tenant_id = $1`, [tenant.id])).length;

  describe('step-up past the maximum age: 401 auth/invalid_token, the session ends (max_age), no token and no mail', () => {
    const signedUp = async () => {
      const email = uniqueEmail('maxage-stepup');
      const reg = await post(t, '/v1/auth/register', { email, password: STRONG_PASSWORD, consent: true }).expect(201);
      return { email, access: reg.body.access_token as string, refresh: reg.body.refresh_token as string };
    };
    const expectEnded = async (u: { access: string; refresh: string }, res: { body: { code: string; detail?: string }; headers: Record<string, string> }) => {
      // the reason in the problem's detail; the challenge carries the RFC 6750 error code only
      expect([res.body.code, res.body.detail, res.headers['www-authenticate']]).toEqual(['auth/invalid_token', expect.stringMatching(/maximum age/), 'Bearer error="invalid_token"']);
      expect(await sessionRow(u.access)).toMatchObject({ revoked_at: expect.any(Date), revoked_reason: 'max_age' });
      await refresh(t, u.refresh).expect(401);
    };

    it('by password: within the age it works; past it, even the right or a wrong password is refused as the session, before any check', async () => {
      const u = await signedUp();
      await age(u.access, MAX_AGE - 120);
      await post(t, '/v1/auth/step-up/password', { password: STRONG_PASSWORD }, u.access).expect(200);
      await age(u.access, 240);
      await expectEnded(u, await post(t, '/v1/auth/step-up/password', { password: 'a wrong password' }, u.access).expect(401));
    });

    for (const [path, kind] of [
      ['/v1/auth/step-up/email-otp', 'code'],
      ['/v1/auth/step-up/magic-link', 'token'],
    ] as const) {
      it(`starting ${path}: nothing is mailed`, async () => {
        const u = await signedUp();
        await age(u.access, MAX_AGE + 60);
        const before = await outboxRows();
        await expectEnded(u, await post(t, path, {}, u.access).expect(401));
        expect(await outboxRows()).toBe(before);
      });

      it(`completing ${path} with a ${kind} mailed in time, once the age is past: no token`, async () => {
        const u = await signedUp();
        await age(u.access, MAX_AGE - 120);
        await post(t, path, {}, u.access).expect(202);
        const secret = await mailedSecret(u.email);
        await age(u.access, 240);
        const res = await post(t, `${path}/verify`, kind === 'code' ? { otp: secret.code } : { token: secret.token }, u.access).expect(401);
        await expectEnded(u, res);
      });
    }
  });

  it('token exchange of an access token whose session is past the maximum age is refused (no agent token outlives the session)', async () => {
    const agent = await createAgent(t.db, tenant.id);
    const reg = await post(t, '/v1/auth/register', { email: uniqueEmail('maxage-xchg'), password: STRONG_PASSWORD, consent: true }).expect(201);
    await age(reg.body.access_token, MAX_AGE - 120);
    await postToken(t, agent, exchangeBody(reg.body.access_token, { scope: 'openid' })).expect(200);

    await age(reg.body.access_token, 240);
    const refused = await postToken(t, agent, exchangeBody(reg.body.access_token, { scope: 'openid' })).expect(400);
    expect(refused.body).toMatchObject({ error: 'invalid_grant', error_description: 'Subject token invalid' });
    const [audit] = await t.db.query<{ metadata: Record<string, unknown> }>(
      `SELECT metadata FROM audit_events WHERE type = 'oauth.token_exchange.subject_invalid' AND metadata->>'agent_client_id' = $1`,
      [agent.id],
    );
    expect(audit.metadata.subject_invalid_reason).toBe('session_max_age');
    expect(await t.db.query(`SELECT 1 FROM audit_events WHERE type = 'oauth.token_exchange.issued' AND metadata->>'agent_client_id' = $1`, [agent.id])).toHaveLength(1);
  });

  it('with the default (0) a session of any age refreshes', async () => {
    const reg = await post(unlimited, '/v1/auth/register', { email: uniqueEmail('maxage-off'), password: STRONG_PASSWORD, consent: true }).expect(201);
    await age(reg.body.access_token, 365 * 86400);
    await refresh(unlimited, reg.body.refresh_token).expect(200);
  });
});
