import { AgentFixture, createAgent } from '../../factories/agent.factory';
import { createTenant, TenantFixture } from '../../factories/tenant.factory';
import { createTestApp, TestApp } from '../../setup/app';
import { basic, claims, exchangeBody, login, postToken, registerUser, RegisteredUser } from './oauth-helpers';

/** Malformed requests to the token endpoint (RFC 6749 sections 2.3.1, 3.2, 5.2), sent raw with supertest. */
describe('POST /oauth/token: request format and client authentication', () => {
  let t: TestApp;
  let tenant: TenantFixture;
  let agent: AgentFixture;
  let user: RegisteredUser;

  beforeAll(async () => {
    t = await createTestApp();
    tenant = await createTenant(t.db, { tier: 'enterprise' });
    agent = await createAgent(t.db, tenant.id, { rate_limits: { token_exchange_per_min: 600 } });
    user = await registerUser(t, tenant);
  });
  afterAll(() => t.close());

  const subject = async () => (await login(t, tenant, user.email)).access_token;
  const expectOAuthError = (res: { status: number; body: Record<string, unknown>; headers: Record<string, string> }, status: number, error: string) => {
    expect(res.status).toBe(status);
    expect(res.body.error).toBe(error);
    expect(typeof res.body.error_description).toBe('string');
    expect(res.headers['cache-control']).toBe('no-store');
    expect(res.headers['content-type']).toMatch(/^application\/json/);
  };

  it('a JSON body is invalid_request (form-encoded only)', async () => {
    const res = await t.http().post('/oauth/token').set('Authorization', basic(agent.id, agent.secret)).send(exchangeBody(await subject()));
    expectOAuthError(res, 400, 'invalid_request');
    expect(res.body.error_description).toMatch(/x-www-form-urlencoded/);
  });

  it('no body, a text body, malformed JSON and any other media type are 400 invalid_request (RFC 6749 section 5.2)', async () => {
    expectOAuthError(await t.http().post('/oauth/token').set('Authorization', basic(agent.id, agent.secret)), 400, 'invalid_request');
    expectOAuthError(await t.http().post('/oauth/token').set('Content-Type', 'text/plain').send('grant_type=x'), 400, 'invalid_request');
    expectOAuthError(await t.http().post('/oauth/token').set('Content-Type', 'application/json').send('{"grant_type":'), 400, 'invalid_request');
    for (const type of ['application/xml', 'application/octet-stream', 'multipart/form-data; boundary=x']) {
      expectOAuthError(await t.http().post('/oauth/token').set('Content-Type', type).send('grant_type=x'), 400, 'invalid_request');
    }
  });

  it('a form of more than 100 distinct parameters is invalid_request (none is dropped unsaid)', async () => {
    const pairs: [string, string][] = [...Array.from({ length: 1_000 }, (_, i): [string, string] => [`junk${i}`, 'x']), ...Object.entries(exchangeBody(await subject()))];
    const res = await t.http().post('/oauth/token').type('form').set('Authorization', basic(agent.id, agent.secret)).send(new URLSearchParams(pairs).toString());
    expectOAuthError(res, 400, 'invalid_request');
    expect(res.body.error_description).toMatch(/At most 100 parameters/);
    const fine: [string, string][] = [...Array.from({ length: 80 }, (_, i): [string, string] => [`junk${i}`, 'x']), ...Object.entries(exchangeBody(await subject()))];
    await t.http().post('/oauth/token').type('form').set('Authorization', basic(agent.id, agent.secret)).send(new URLSearchParams(fine).toString()).expect(200);
  });

  it('a form with a charset parameter is accepted; unknown parameters are ignored (RFC 6749 section 3.2)', async () => {
    const body = new URLSearchParams({ ...exchangeBody(await subject()), unknown_param: 'x' }).toString();
    const res = await t.http().post('/oauth/token').set('Content-Type', 'application/x-www-form-urlencoded; charset=UTF-8').set('Authorization', basic(agent.id, agent.secret)).send(body).expect(200);
    expect(claims(res.body.access_token).act).toEqual({ sub: agent.id });
  });

  it('a repeated parameter is invalid_request; an empty one counts as omitted (RFC 6749 section 3.1)', async () => {
    const st = await subject();
    const repeated = new URLSearchParams([...Object.entries(exchangeBody(st)), ['subject_token', st]]).toString();
    expectOAuthError(await t.http().post('/oauth/token').type('form').set('Authorization', basic(agent.id, agent.secret)).send(repeated), 400, 'invalid_request');
    const res = await postToken(t, agent, exchangeBody(st, { scope: '', audience: '' })).expect(200);
    expect(res.body.scope).toBe('openid profile email');
    // an empty repeat is a repeat too: which of the two was meant is not for the server to guess
    const emptyRepeat = new URLSearchParams([...Object.entries(exchangeBody(await subject())), ['scope', 'openid'], ['scope', '']]).toString();
    const r = await t.http().post('/oauth/token').type('form').set('Authorization', basic(agent.id, agent.secret)).send(emptyRepeat);
    expectOAuthError(r, 400, 'invalid_request');
    expect(r.body.error_description).toMatch(/scope must not be repeated/);
  });

  it('a form is UTF-8: another charset, or percent-encoded bytes that are not UTF-8, are invalid_request (never read as U+FFFD)', async () => {
    const body = new URLSearchParams(exchangeBody(await subject())).toString();
    const send = (type: string, text: string) => t.http().post('/oauth/token').set('Content-Type', type).set('Authorization', basic(agent.id, agent.secret)).send(text);
    expectOAuthError(await send('application/x-www-form-urlencoded; charset=iso-8859-1', body), 400, 'invalid_request');
    const bad = await send('application/x-www-form-urlencoded', `${body}&scope=openid%ff`);
    expectOAuthError(bad, 400, 'invalid_request');
    expect(bad.body.error_description).toMatch(/UTF-8/);
    // a lone % is kept as typed (every form parser does), and UTF-8 percent-encodings decode
    const ok = await send('application/x-www-form-urlencoded; charset="utf-8"', `${body}&unknown=50%&scope=openid%20email`).expect(200);
    expect(ok.body.scope).toBe('openid email');
    // a raw byte that is not UTF-8 is refused too, even in a parameter the server ignores (not read as U+FFFD)
    const raw = await t
      .http()
      .post('/oauth/token')
      .set('Content-Type', 'application/x-www-form-urlencoded')
      .set('Authorization', basic(agent.id, agent.secret))
      .send(Buffer.concat([Buffer.from(`${body}&note=`), Buffer.from([0xff])]));
    expectOAuthError(raw, 400, 'invalid_request');
  });

  it('a raw non-ASCII character beside a lone % keeps its value (Ł% is not read as A%)', async () => {
    // scope is checked against the agent's allowlist: a value changed on the way would be another scope
    const body = new URLSearchParams(exchangeBody(await subject())).toString();
    const res = await t.http().post('/oauth/token').set('Content-Type', 'application/x-www-form-urlencoded').set('Authorization', basic(agent.id, agent.secret)).send(`${body}&scope=Ł%`);
    expectOAuthError(res, 400, 'invalid_scope');
    // read as `A%` it would be a well-formed scope the agent lacks ("None of the requested scopes...")
    expect(res.body.error_description).toBe('The scope parameter is malformed');
    const ok = await t.http().post('/oauth/token').set('Content-Type', 'application/x-www-form-urlencoded').set('Authorization', basic(agent.id, agent.secret)).send(`${body}&é%=x&scope=openid`).expect(200);
    expect(ok.body.scope).toBe('openid');
  });

  it('missing grant_type is invalid_request', async () => {
    const { grant_type: _, ...rest } = exchangeBody(await subject());
    expectOAuthError(await postToken(t, agent, rest), 400, 'invalid_request');
  });

  it('HTTP Basic credentials are form-urlencoded before base64 (RFC 6749 section 2.3.1)', async () => {
    // every character percent-encoded: a server that skips the decoding sees an unknown client
    const pct = (s: string) => [...Buffer.from(s)].map((b) => `%${b.toString(16).toUpperCase().padStart(2, '0')}`).join('');
    const header = `Basic ${Buffer.from(`${pct(agent.id)}:${pct(agent.secret)}`).toString('base64')}`;
    const res = await t.http().post('/oauth/token').type('form').set('Authorization', header).send(exchangeBody(await subject())).expect(200);
    expect(claims(res.body.access_token).act).toEqual({ sub: agent.id });
  });

  it('Basic plus client_secret in the body is invalid_request (one method only); a matching body client_id is fine', async () => {
    const st = await subject();
    expectOAuthError(await postToken(t, agent, { ...exchangeBody(st), client_id: agent.id, client_secret: agent.secret }), 400, 'invalid_request');
    expectOAuthError(await postToken(t, agent, { ...exchangeBody(st), client_id: '00000000-0000-4000-8000-000000000000' }), 400, 'invalid_request');
    await postToken(t, agent, { ...exchangeBody(st), client_id: agent.id }).expect(200);
  });

  it('client_secret_post with the body credentials', async () => {
    const res = await postToken(t, null, { ...exchangeBody(await subject()), client_id: agent.id, client_secret: agent.secret }).expect(200);
    expect(claims(res.body.access_token).act).toEqual({ sub: agent.id });
  });

  it('no credentials, a client_id without secret, malformed Basic and other schemes are 401 invalid_client', async () => {
    const st = await subject();
    const none = await postToken(t, null, exchangeBody(st));
    expectOAuthError(none, 401, 'invalid_client');
    expectOAuthError(await postToken(t, null, { ...exchangeBody(st), client_id: agent.id }), 401, 'invalid_client');
    for (const header of [
      `Basic ${Buffer.from(`${agent.id}${agent.secret}`).toString('base64')}`,
      `Basic ${Buffer.from(`${agent.id}:%ZZ`).toString('base64')}`,
      'Basic !!!',
      `Bearer ${st}`,
    ]) {
      const res = await t.http().post('/oauth/token').type('form').set('Authorization', header).send(exchangeBody(st));
      expectOAuthError(res, 401, 'invalid_client');
      expect(res.headers['www-authenticate']).toMatch(/^Basic /);
    }
    const wrongPost = await postToken(t, null, { ...exchangeBody(st), client_id: agent.id, client_secret: 'wrong' });
    expectOAuthError(wrongPost, 401, 'invalid_client');
    // every 401 carries a challenge (RFC 9110 section 15.5.2): Basic, the scheme the client may use
    expect(wrongPost.headers['www-authenticate']).toMatch(/^Basic /);
  });

  it('a failed client authentication writes no audit row and issues nothing', async () => {
    const st = await subject();
    const before = await t.db.query(`SELECT count(*)::int AS n FROM audit_events WHERE tenant_id = $1`, [tenant.id]);
    await postToken(t, { id: agent.id, secret: 'wrong' }, exchangeBody(st)).expect(401);
    const after = await t.db.query(`SELECT count(*)::int AS n FROM audit_events WHERE tenant_id = $1`, [tenant.id]);
    expect(after[0].n).toBe(before[0].n);
  });

  it('an oversized subject token is invalid_request, not a server error', async () => {
    expectOAuthError(await postToken(t, agent, exchangeBody('a'.repeat(20_000))), 400, 'invalid_request');
  });

  it('GET is not a token request', async () => {
    const res = await t.http().get('/oauth/token');
    expect(res.status).toBe(405);
    expect(res.headers.allow).toBe('POST');
    expect(res.body.access_token).toBeUndefined();
    expect(res.body).toEqual({ error: 'invalid_request', error_description: 'GET is not allowed on this path' });
  });
});
