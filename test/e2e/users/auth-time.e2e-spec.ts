import { createTestApp, randomIp, STRONG_PASSWORD, TestApp, uniqueEmail } from '../../setup/app';
import { createTenant, TenantFixture } from '../../factories/tenant.factory';

const claims = (token: string): Record<string, unknown> => JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString());
const nowSeconds = () => Math.floor(Date.now() / 1000);

/**
 * Contract "Tokens": MFA and step-up times are NumericDate seconds. `auth_time` (OIDC Core 2) is
 * when the user authenticated in the session: set when the session starts (a sign-in, a guest's
 * first token) or when a guest is claimed, and kept across refreshes and step-ups.
 */
describe('auth_time: when the user authenticated in the session', () => {
  let t: TestApp;
  let tenant: TenantFixture;
  beforeAll(async () => {
    t = await createTestApp();
    tenant = await createTenant(t.db, { anonymous_signins_enabled: true });
  });
  afterAll(() => t.close());

  const post = (path: string, body: object, auth?: { bearer?: string }) => {
    const req = t.http().post(path).set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', randomIp());
    if (auth?.bearer) req.set('Authorization', `Bearer ${auth.bearer}`);
    return req.send(body);
  };
  const refresh = (token: string) => post('/v1/auth/refresh', { refresh_token: token });
  /** Moves a session's start (and any claim time) an hour back, as if it began then. */
  const backdate = async (accessToken: string) => {
    await t.db.query(`UPDATE user_sessions SET created_at = created_at - interval '1 hour', authenticated_at = authenticated_at - interval '1 hour' WHERE id = $1`, [claims(accessToken).sid]);
    return (claims(accessToken).auth_time as number) - 3600;
  };

  it('a sign-in sets it to the session start; refresh (also the grace case) and step-up keep it; a new sign-in has its own', async () => {
    const email = uniqueEmail('at');
    const before = nowSeconds();
    const reg = await post('/v1/auth/register', { email, password: STRONG_PASSWORD, consent: true }).expect(201);
    const c = claims(reg.body.access_token);
    expect(c.auth_time).toEqual(expect.any(Number));
    expect(c.auth_time).toBeGreaterThanOrEqual(before - 1);
    expect(c.auth_time).toBeLessThanOrEqual(c.iat as number);
    const [s] = await t.db.query<{ at: number }>(`SELECT floor(extract(epoch FROM created_at))::float8 AS at FROM user_sessions WHERE id = $1`, [c.sid]);
    expect(c.auth_time).toBe(s.at);

    // an hour later, as far as the session knows: refreshing does not authenticate anyone
    const started = await backdate(reg.body.access_token);
    const r1 = await refresh(reg.body.refresh_token).expect(200);
    expect(claims(r1.body.access_token).auth_time).toBe(started);
    const grace = await refresh(reg.body.refresh_token).expect(200);
    expect(claims(grace.body.access_token).auth_time).toBe(started);

    // step-up proves the password now (step_up_at) but the session's sign-in stays when it was
    const stepped = await post('/v1/auth/step-up/password', { password: STRONG_PASSWORD }, { bearer: r1.body.access_token }).expect(200);
    const sc = claims(stepped.body.access_token);
    expect(sc.auth_time).toBe(started);
    expect(sc.step_up_at).toBeGreaterThanOrEqual(before);

    const login = await post('/v1/auth/login', { email, password: STRONG_PASSWORD }).expect(200);
    expect(claims(login.body.access_token).auth_time).toBeGreaterThanOrEqual(before - 1);
    expect(claims(login.body.access_token).sid).not.toBe(c.sid);
  });

  it('a guest gets it at its first token; a claim (registration into the session) sets it anew, and refreshes keep that', async () => {
    const before = nowSeconds();
    const g = await post('/v1/auth/anonymous', {}).expect(201);
    const gc = claims(g.body.access_token);
    expect(gc.auth_time).toBeGreaterThanOrEqual(before - 1);
    expect(gc.auth_time).toBeLessThanOrEqual(gc.iat as number);
    const guestStart = await backdate(g.body.access_token);
    expect(claims((await refresh(g.body.refresh_token).expect(200)).body.access_token).auth_time).toBe(guestStart);

    const claimed = await post('/v1/auth/register', { email: uniqueEmail('claim'), password: STRONG_PASSWORD, consent: true }, { bearer: g.body.access_token }).expect(201);
    const cc = claims(claimed.body.access_token);
    expect(cc.sid).toBe(gc.sid);
    expect(cc.auth_time).toBeGreaterThanOrEqual(before - 1);
    const claimedAt = cc.auth_time;
    const after = await refresh(claimed.body.refresh_token).expect(200);
    expect(claims(after.body.access_token).auth_time).toBe(claimedAt);
  });
});
