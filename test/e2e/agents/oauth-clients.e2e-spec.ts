import { createHash } from 'crypto';
import { createTestApp, TestApp } from '../../setup/app';
import { basic } from '../oauth/oauth-helpers';
import { addMember, as, endUser, Session, tenantOnTier, TOKEN_EXCHANGE } from './agents.helpers';

const url = (s: Session, rest = '') => `/v1/auth/dashboard/tenants/${s.slug}/oauth-clients${rest}`;
const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

describe('legacy OAuth clients (contract "Agents and OAuth", spec 7.4)', () => {
  let t: TestApp;
  let owner: Session;
  let member: Session;
  let other: Session;
  beforeAll(async () => {
    t = await createTestApp();
    owner = await tenantOnTier(t, 'free');
    member = await addMember(t, owner, 'member');
    other = await tenantOnTier(t, 'pro');
  });
  afterAll(() => t.close());

  it('registers a confidential client with a secret shown once (hash stored) and a public one without', async () => {
    const conf = await as(t, owner)
      .post(url(owner), { name: 'Backend', client_type: 'confidential', redirect_uris: ['https://app.example.com/cb'], grant_types: ['authorization_code', 'refresh_token', 'client_credentials'], scopes: ['openid', 'email'] })
      .expect(201);
    expect(conf.body).toEqual({
      id: expect.any(String),
      client_id: conf.body.id,
      name: 'Backend',
      client_type: 'confidential',
      redirect_uris: ['https://app.example.com/cb'],
      grant_types: ['authorization_code', 'refresh_token', 'client_credentials'],
      scopes: ['openid', 'email'],
      created_at: expect.any(String),
      revoked_at: null,
      client_secret: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
    });
    const [row] = await t.db.query<{ secret_hash: string }>(`SELECT secret_hash FROM oauth_clients WHERE id = $1`, [conf.body.id]);
    expect(row.secret_hash).toBe(createHash('sha256').update(conf.body.client_secret).digest('hex'));
    const pub = await as(t, owner).post(url(owner), { name: 'SPA', client_type: 'public', redirect_uris: ['http://localhost:5173/cb'] }).expect(201);
    expect(pub.body).not.toHaveProperty('client_secret');
    expect(pub.body.grant_types).toEqual(['authorization_code']);

    const list = await as(t, member).get(url(owner)).expect(200);
    expect(list.body.pagination).toEqual({ next_cursor: null, has_more: false });
    expect(list.body.data.map((c: { id: string }) => c.id)).toEqual([pub.body.id, conf.body.id]);
    expect(JSON.stringify(list.body)).not.toContain(conf.body.client_secret);
    expect((await as(t, other).get(url(other)).expect(200)).body.data).toEqual([]);
  });

  it('refuses client_type "agent" with 400 oauth_client/use_agents_endpoint, whatever else the body holds', async () => {
    for (const body of [
      { name: 'Agent', client_type: 'agent' },
      { name: 'Agent', client_type: 'agent', grant_types: ['urn:ietf:params:oauth:grant-type:token-exchange'], agent_token_max_ttl_sec: 300 },
      { client_type: 'agent' },
    ]) {
      const res = await as(t, owner).post(url(owner), body).expect(400);
      expect(res.body).toMatchObject({ status: 400, code: 'oauth_client/use_agents_endpoint' });
    }
    expect((await as(t, owner).get(url(owner)).expect(200)).body.data.some((c: { name: string }) => c.name === 'Agent')).toBe(false);
  });

  it('validates the other fields with 400 request/invalid', async () => {
    for (const body of [
      {},
      { name: 'x' },
      { name: 'x', client_type: 'private' },
      { name: '', client_type: 'public' },
      { name: '\u202eevil', client_type: 'public' },
      { name: 'x', client_type: 'public', redirect_uris: ['not a url'] },
      { name: 'x', client_type: 'public', redirect_uris: ['javascript:alert(1)'] },
      { name: 'x', client_type: 'public', grant_types: ['password'] },
      { name: 'x', client_type: 'public', grant_types: ['urn:ietf:params:oauth:grant-type:token-exchange'] },
      { name: 'x', client_type: 'public', grant_types: ['client_credentials'] },
      { name: 'x', client_type: 'public', scopes: ['a b'] },
      { name: 'x', client_type: 'public', secret: 'mine' },
    ]) {
      expect((await as(t, owner).post(url(owner), body).expect(400)).body.code).toBe('request/invalid');
    }
  });

  it('is owners-only for writes; another tenant’s slug is 404', async () => {
    expect((await as(t, member).post(url(owner), { name: 'x', client_type: 'public' }).expect(403)).body.code).toBe('auth/forbidden');
    expect((await as(t, owner).get(url(other)).expect(404)).body.code).toBe('tenant/not_found');
    expect((await as(t, owner).post(url(other), { name: 'x', client_type: 'public' }).expect(404)).body.code).toBe('tenant/not_found');
    await t.http().post(url(owner)).send({ name: 'x', client_type: 'agent' }).expect(401);
    expect((await as(t, member).post(url(owner), { name: 'x', client_type: 'agent' }).expect(403)).body.code).toBe('auth/forbidden');
  });

  it('pages with a cursor', async () => {
    const d = await tenantOnTier(t, 'free');
    for (let i = 0; i < 3; i++) await as(t, d).post(url(d), { name: `c${i}`, client_type: 'confidential', grant_types: ['client_credentials'] }).expect(201);
    const p1 = await as(t, d).get(`${url(d)}?limit=2`).expect(200);
    expect(p1.body.data.map((c: { name: string }) => c.name)).toEqual(['c2', 'c1']);
    const p2 = await as(t, d).get(`${url(d)}?limit=2&cursor=${encodeURIComponent(p1.body.pagination.next_cursor)}`).expect(200);
    expect(p2.body.data.map((c: { name: string }) => c.name)).toEqual(['c0']);
    expect((await as(t, d).get(`${url(d)}?limit=101`).expect(400)).body.code).toBe('request/invalid');
  });
  describe('one client: GET, DELETE (revoke), POST rotate-secret', () => {
    type Client = { id: string; client_secret?: string; [k: string]: unknown };
    const create = async (s: Session, body: object = {}): Promise<Client> =>
      (await as(t, s).post(url(s), { name: 'Resource server', client_type: 'confidential', grant_types: ['client_credentials'], ...body }).expect(201)).body;
    const audits = (type: string, id: string) => t.db.query(`SELECT actor_id, severity, metadata FROM audit_events WHERE type = $1 AND target_id = $2`, [type, id]);
    /** What the client's credentials get at each /oauth endpoint that authenticates clients. */
    const oauthAs = async (id: string, secret: string, token: string) => {
      const auth = basic(id, secret);
      const introspect = await t.http().post('/oauth/introspect').type('form').set('Authorization', auth).send({ token });
      const revoke = await t.http().post('/oauth/revoke').type('form').set('Authorization', auth).send({ token: 'not-a-token' });
      const exchange = await t.http().post('/oauth/token').type('form').set('Authorization', auth)
        .send({ grant_type: TOKEN_EXCHANGE, subject_token: token, subject_token_type: 'urn:ietf:params:oauth:token-type:access_token' });
      return {
        introspect: [introspect.status, introspect.body.error ?? introspect.body.active],
        revoke: [revoke.status, revoke.body.error],
        token: [exchange.status, exchange.body.error],
      };
    };
    let userToken: string;
    beforeAll(async () => {
      userToken = (await endUser(t, owner)).accessToken;
    });

    it('GET answers one client (any tenant member), never its secret', async () => {
      const c = await create(owner, { redirect_uris: ['https://rs.example.com/cb'], scopes: ['openid'] });
      const { client_secret, ...shown } = c;
      const got = await as(t, member).get(url(owner, `/${c.id}`)).expect(200);
      expect(got.body).toEqual(shown);
      expect(JSON.stringify(got.body)).not.toContain(client_secret);
      expect(got.body).not.toHaveProperty('secret_hash');
      // an upper-case id answers the id as stored
      expect((await as(t, owner).get(url(owner, `/${c.id.toUpperCase()}`)).expect(200)).body.id).toBe(c.id);
    });

    it('answers 404 oauth_client/not_found on every route for another tenant’s client, an unknown id and a malformed id, and changes nothing', async () => {
      const theirs = await create(other);
      const routes: [string, (u: string) => ReturnType<ReturnType<typeof as>['get']>][] = [
        ['', (u) => as(t, owner).get(u)],
        ['', (u) => as(t, owner).delete(u)],
        ['/rotate-secret', (u) => as(t, owner).post(u)],
      ];
      const strip = (b: Record<string, unknown>) => ({ ...b, request_id: undefined });
      for (const [suffix, call] of routes) {
        const cross = await call(url(owner, `/${theirs.id}${suffix}`)).expect(404);
        const unknown = await call(url(owner, `/00000000-0000-4000-8000-000000000000${suffix}`)).expect(404);
        const malformed = await call(url(owner, `/not-a-uuid${suffix}`)).expect(404);
        expect(cross.body).toMatchObject({ status: 404, code: 'oauth_client/not_found' });
        expect(strip(unknown.body)).toEqual(strip(cross.body));
        expect(strip(malformed.body)).toEqual(strip(cross.body));
      }
      const [row] = await t.db.query<{ revoked_at: Date | null; secret_hash: string }>(`SELECT revoked_at, secret_hash FROM oauth_clients WHERE id = $1`, [theirs.id]);
      expect(row).toEqual({ revoked_at: null, secret_hash: sha256(theirs.client_secret!) });
      expect(await audits('oauth_client.revoked', theirs.id)).toHaveLength(0);
      expect(await audits('oauth_client.secret_rotated', theirs.id)).toHaveLength(0);
    });

    it('DELETE and rotate-secret are owners-only (member 403), need the CSRF token, and rotate-secret a recent reauth', async () => {
      const c = await create(owner);
      expect((await as(t, member).delete(url(owner, `/${c.id}`)).expect(403)).body.code).toBe('auth/forbidden');
      expect((await as(t, member).post(url(owner, `/${c.id}/rotate-secret`)).expect(403)).body.code).toBe('auth/forbidden');
      expect((await t.http().delete(url(owner, `/${c.id}`)).set('Cookie', owner.cookie).expect(403)).body.code).toBe('csrf/invalid');
      expect((await t.http().post(url(owner, `/${c.id}/rotate-secret`)).set('Cookie', owner.cookie).send({}).expect(403)).body.code).toBe('csrf/invalid');
      await t.http().get(url(owner, `/${c.id}`)).expect(401);
      const [row] = await t.db.query<{ revoked_at: Date | null; secret_hash: string }>(`SELECT revoked_at, secret_hash FROM oauth_clients WHERE id = $1`, [c.id]);
      expect(row).toEqual({ revoked_at: null, secret_hash: sha256(c.client_secret!) });

      // a session signed in long ago: rotating mints a credential (reauth), revoking does not
      const d = await tenantOnTier(t, 'free');
      const late = await create(d);
      await t.db.query(`UPDATE dashboard_sessions SET created_at = now() - interval '10 minutes', reauth_at = NULL WHERE user_id = $1`, [d.userId]);
      expect((await as(t, d).post(url(d, `/${late.id}/rotate-secret`)).expect(403)).body.code).toBe('auth/reauth_required');
      await as(t, d).delete(url(d, `/${late.id}`)).expect(200);
    });

    it('DELETE revokes: 200 with the client and revoked_at, one high audit event; its authentication at /oauth/* is refused at once', async () => {
      const c = await create(owner);
      // before: authenticated (introspection answers, revocation answers, token exchange is refused as not an agent)
      expect(await oauthAs(c.id, c.client_secret!, userToken)).toEqual({ introspect: [200, true], revoke: [200, undefined], token: [400, 'unauthorized_client'] });

      const res = await as(t, owner).delete(url(owner, `/${c.id}`)).expect(200);
      const { client_secret, ...shown } = c;
      expect(res.body).toEqual({ ...shown, revoked_at: expect.any(String) });
      expect(JSON.stringify(res.body)).not.toContain(client_secret);
      expect(Date.now() - Date.parse(res.body.revoked_at)).toBeLessThan(60_000);

      // right after the answer: 401 invalid_client everywhere
      expect(await oauthAs(c.id, c.client_secret!, userToken)).toEqual({ introspect: [401, 'invalid_client'], revoke: [401, 'invalid_client'], token: [401, 'invalid_client'] });

      expect(await audits('oauth_client.revoked', c.id)).toEqual([
        { actor_id: owner.userId, severity: 'high', metadata: { client_type: 'confidential', name: 'Resource server', revoked_at: res.body.revoked_at } },
      ]);
      // visible as revoked to readers
      expect((await as(t, member).get(url(owner, `/${c.id}`)).expect(200)).body.revoked_at).toBe(res.body.revoked_at);
      const listed = (await as(t, member).get(url(owner, '?limit=100')).expect(200)).body.data.find((x: Client) => x.id === c.id);
      expect(listed.revoked_at).toBe(res.body.revoked_at);
    });

    it('a repeat DELETE answers the first revoked_at and writes no second audit event; a revoked public client is refused too', async () => {
      const c = await create(owner);
      const first = await as(t, owner).delete(url(owner, `/${c.id}`)).expect(200);
      const again = await as(t, owner).delete(url(owner, `/${c.id}`)).expect(200);
      expect(again.body).toEqual(first.body);
      expect(await audits('oauth_client.revoked', c.id)).toHaveLength(1);

      const pub = await create(owner, { client_type: 'public', grant_types: ['authorization_code'], redirect_uris: ['com.example.app:/cb'] });
      const before = await t.http().post('/oauth/token').type('form').send({ client_id: pub.id, grant_type: TOKEN_EXCHANGE });
      expect([before.status, before.body.error]).toEqual([400, 'unauthorized_client']);
      expect((await as(t, owner).delete(url(owner, `/${pub.id}`)).expect(200)).body).toMatchObject({ id: pub.id, client_type: 'public', revoked_at: expect.any(String) });
      const after = await t.http().post('/oauth/token').type('form').send({ client_id: pub.id, grant_type: TOKEN_EXCHANGE });
      expect([after.status, after.body.error]).toEqual([401, 'invalid_client']);
    });

    it('10 parallel DELETEs: every answer 200 with one revoked_at, exactly one audit event', async () => {
      const owner2 = await addMember(t, owner, 'owner');
      const c = await create(owner);
      const sessions = [owner, owner2];
      const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => as(t, sessions[i % 2]).delete(url(owner, `/${c.id}`))));
      expect(answers.map((r) => r.status)).toEqual(Array(10).fill(200));
      expect(new Set(answers.map((r) => r.body.revoked_at)).size).toBe(1);
      expect(await audits('oauth_client.revoked', c.id)).toHaveLength(1);
    });

    it('rotate-secret: a new secret shown once (only its SHA-256 stored); the old one is refused at once, the new one accepted', async () => {
      const c = await create(owner, { redirect_uris: ['https://rs.example.com/cb'] });
      const res = await as(t, owner).post(url(owner, `/${c.id}/rotate-secret`)).expect(200);
      const { client_secret: oldSecret, ...shown } = c;
      expect(res.body).toEqual({ ...shown, client_secret: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/) });
      expect(res.body.client_secret).not.toBe(oldSecret);
      const [row] = await t.db.query<{ secret_hash: string }>(`SELECT secret_hash FROM oauth_clients WHERE id = $1`, [c.id]);
      expect(row.secret_hash).toBe(sha256(res.body.client_secret));
      expect(JSON.stringify((await as(t, owner).get(url(owner, `/${c.id}`)).expect(200)).body)).not.toContain(res.body.client_secret);

      expect(await oauthAs(c.id, oldSecret!, userToken)).toEqual({ introspect: [401, 'invalid_client'], revoke: [401, 'invalid_client'], token: [401, 'invalid_client'] });
      expect(await oauthAs(c.id, res.body.client_secret, userToken)).toEqual({ introspect: [200, true], revoke: [200, undefined], token: [400, 'unauthorized_client'] });
      // client_secret_post too
      const post = await t.http().post('/oauth/introspect').type('form').send({ client_id: c.id, client_secret: oldSecret, token: userToken });
      expect([post.status, post.body.error]).toEqual([401, 'invalid_client']);
      expect(await audits('oauth_client.secret_rotated', c.id)).toEqual([{ actor_id: owner.userId, severity: 'medium', metadata: { client_type: 'confidential' } }]);
    });

    it('rotate-secret: 409 oauth_client/not_confidential for a public client, 409 oauth_client/already_revoked once revoked; nothing changes', async () => {
      const pub = await create(owner, { client_type: 'public', grant_types: ['authorization_code'] });
      const p = await as(t, owner).post(url(owner, `/${pub.id}/rotate-secret`)).expect(409);
      expect(p.body).toMatchObject({ status: 409, code: 'oauth_client/not_confidential' });
      expect(await t.db.query(`SELECT secret_hash FROM oauth_clients WHERE id = $1`, [pub.id])).toEqual([{ secret_hash: null }]);

      const c = await create(owner);
      await as(t, owner).delete(url(owner, `/${c.id}`)).expect(200);
      const r = await as(t, owner).post(url(owner, `/${c.id}/rotate-secret`)).expect(409);
      expect(r.body).toMatchObject({ status: 409, code: 'oauth_client/already_revoked' });
      expect(await t.db.query(`SELECT secret_hash FROM oauth_clients WHERE id = $1`, [c.id])).toEqual([{ secret_hash: sha256(c.client_secret!) }]);
      await as(t, owner).delete(url(owner, `/${pub.id}`)).expect(200);
      expect((await as(t, owner).post(url(owner, `/${pub.id}/rotate-secret`)).expect(409)).body.code).toBe('oauth_client/already_revoked');
      expect(await audits('oauth_client.secret_rotated', c.id)).toHaveLength(0);
      expect(await audits('oauth_client.secret_rotated', pub.id)).toHaveLength(0);
    });
  });

  describe('redirect URIs (RFC 6749 section 3.1.2, RFC 8252, RFC 9700)', () => {
    it.each([
      ['a fragment', 'https://app.example.com/cb#state', /fragment/],
      ['an empty fragment', 'https://app.example.com/cb#', /fragment/],
      ['userinfo user:pass@', 'https://user:pass@app.example.com/cb', /userinfo/],
      ['userinfo user@', 'https://user@app.example.com/cb', /userinfo/],
      ['plain http to a public host', 'http://app.example.com/cb', /https/],
      ['plain http to a private address', 'http://192.168.1.10/cb', /https/],
      ['plain http to a host that only starts like loopback', 'http://127.0.0.1.nip.io/cb', /https/],
      ['plain http to a subdomain of localhost', 'http://localhost.example.com/cb', /https/],
      ['a custom scheme that is not a reverse domain', 'myapp:/cb', /reverse domain/],
      ['a data: URI', 'data:text/html,hi', /reverse domain/],
    ])('refuses %s with 400 request/invalid on redirect_uris', async (_what, uri, why) => {
      const res = await as(t, owner).post(url(owner), { name: 'x', client_type: 'public', redirect_uris: ['https://ok.example.com/cb', uri] }).expect(400);
      expect(res.body.code).toBe('request/invalid');
      expect(res.body.errors).toEqual([{ field: 'redirect_uris', message: expect.stringMatching(why) }]);
      expect(res.body.errors[0].message).toMatch(/^redirect_uris\.1 /); // the dotted path field paths use
    });

    it('accepts https, http on 127.0.0.1, [::1] and localhost, and a private-use scheme for native apps', async () => {
      const uris = ['https://app.example.com/cb', 'http://127.0.0.1:8400/cb', 'http://[::1]:8400/cb', 'http://localhost:5173/cb', 'com.example.app:/oauth2redirect'];
      const res = await as(t, owner).post(url(owner), { name: 'Native', client_type: 'public', redirect_uris: uris }).expect(201);
      expect(res.body.redirect_uris).toEqual(uris);
    });
  });
});
