import { createTestApp, TestApp } from '../../setup/app';
import { agentsUrl, as, Session, tenantOnTier, TOKEN_EXCHANGE } from './agents.helpers';

/**
 * Found by a hostile-tenant review: agents and confidential OAuth clients are credentials minted
 * like API keys (a client secret each, after a reauth), so a tenant holds a bounded number of live
 * ones (a stolen dashboard session cannot mint them without end); and the owners' agent_revoked
 * notice is capped per address and window like every looped notice (a create + revoke loop with a
 * name of the tenant's choosing cannot flood a mailbox).
 */
describe('per-tenant ceilings and notice caps', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(() => t.close());

  /** Fills the tenant up to `live` live rows of `table` (SQL: the HTTP path is tested at the edge). */
  const fillTo = async (table: 'agent_clients' | 'oauth_clients', tenantId: string, live: number) => {
    const cols = table === 'agent_clients' ? `(tenant_id, name, scopes, grant_types, secret_hash)` : `(tenant_id, name, client_type, grant_types, secret_hash)`;
    const vals = table === 'agent_clients' ? `$1, 'filler ' || g, '{openid}', '{${TOKEN_EXCHANGE}}', md5(random()::text || g)` : `$1, 'filler ' || g, 'confidential', '{}', md5(random()::text || g)`;
    await t.db.query(`INSERT INTO ${table} ${cols} SELECT ${vals} FROM generate_series(1, $2) g`, [tenantId, live]);
  };
  const createAgent = (owner: Session) => as(t, owner).post(agentsUrl(owner), { name: 'one more', scopes: ['openid'], grant_types: [TOKEN_EXCHANGE] });
  const createClient = (owner: Session) =>
    as(t, owner).post(`/v1/auth/dashboard/tenants/${owner.slug}/oauth-clients`, { name: 'one more', client_type: 'confidential', redirect_uris: ['https://app.example.com/cb'] });

  it('500 live agents: the 501st is 409 agent/limit_reached, parallel creates at the edge get one place, a revoked agent makes room', async () => {
    const owner = await tenantOnTier(t, 'pro');
    await fillTo('agent_clients', owner.tenantId, 498);
    // revoked agents do not count
    await t.db.query(`INSERT INTO agent_clients (tenant_id, name, scopes, grant_types, secret_hash, revoked_at) VALUES ($1, 'gone', '{openid}', $2, md5(random()::text), now())`, [owner.tenantId, [TOKEN_EXCHANGE]]);
    const first = await createAgent(owner).expect(201);
    expect(first.body.client_secret).toEqual(expect.any(String));
    const racing = await Promise.all([createAgent(owner), createAgent(owner), createAgent(owner)]);
    expect(racing.map((r) => r.status).sort()).toEqual([201, 409, 409]);
    const refused = racing.find((r) => r.status === 409)!;
    expect(refused.body).toMatchObject({ code: 'agent/limit_reached', detail: 'A tenant may have at most 500 live agents; revoke one first' });
    expect(refused.body.client_secret).toBeUndefined();
    const [{ n }] = await t.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM agent_clients WHERE tenant_id = $1 AND revoked_at IS NULL`, [owner.tenantId]);
    expect(n).toBe(500);
    await as(t, owner).delete(agentsUrl(owner, `/${first.body.id}`)).expect(200);
    await createAgent(owner).expect(201);
    await createAgent(owner).expect(409);
  }, 60_000);

  it('100 live OAuth clients: the 101st is 409 oauth_client/limit_reached, a revoked one makes room (free tier too)', async () => {
    const owner = await tenantOnTier(t, 'free');
    await fillTo('oauth_clients', owner.tenantId, 99);
    const first = await createClient(owner).expect(201);
    const refused = await createClient(owner).expect(409);
    expect(refused.body).toMatchObject({ code: 'oauth_client/limit_reached', detail: 'A tenant may have at most 100 live OAuth clients; revoke one first' });
    expect(refused.body.client_secret).toBeUndefined();
    await as(t, owner).delete(`/v1/auth/dashboard/tenants/${owner.slug}/oauth-clients/${first.body.client_id ?? first.body.id}`).expect(200);
    await createClient(owner).expect(201);
  }, 60_000);

  it("a create + revoke loop mails each owner at most RATE_LIMIT_EMAIL_PER_ADDRESS agent_revoked notices per window; every revoke still happens", async () => {
    const owner = await tenantOnTier(t, 'pro');
    const cap = Number(process.env.RATE_LIMIT_EMAIL_PER_ADDRESS ?? 5);
    const loops = cap + 3;
    for (let i = 0; i < loops; i++) {
      const a = await as(t, owner).post(agentsUrl(owner), { name: 'Your account is suspended: sign in at evil.example', scopes: ['openid'], grant_types: [TOKEN_EXCHANGE] }).expect(201);
      await as(t, owner).delete(agentsUrl(owner, `/${a.body.id}`)).expect(200);
    }
    const [{ mails }] = await t.db.query<{ mails: number }>(
      `SELECT count(*)::int AS mails FROM outbox WHERE topic = 'email' AND payload->>'template' = 'agent_revoked' AND lower(payload->>'to') = lower($1)`,
      [owner.email],
    );
    expect(mails).toBe(cap);
    const [{ revoked }] = await t.db.query<{ revoked: number }>(`SELECT count(*)::int AS revoked FROM agent_clients WHERE tenant_id = $1 AND revoked_at IS NOT NULL`, [owner.tenantId]);
    expect(revoked).toBe(loops);
    const [{ events }] = await t.db.query<{ events: number }>(`SELECT count(*)::int AS events FROM audit_events WHERE tenant_id = $1 AND type = 'agent.revoked'`, [owner.tenantId]);
    expect(events).toBe(loops);
  }, 60_000);
});
