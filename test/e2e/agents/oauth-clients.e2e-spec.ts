import { createHash } from 'crypto';
import { createTestApp, TestApp } from '../../setup/app';
import { addMember, as, Session, tenantOnTier } from './agents.helpers';

const url = (s: Session) => `/v1/auth/dashboard/tenants/${s.slug}/oauth-clients`;

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
});
