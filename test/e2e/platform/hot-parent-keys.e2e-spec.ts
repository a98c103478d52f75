import { createAgent } from '../../factories/agent.factory';
import { createTenant } from '../../factories/tenant.factory';
import { createTestApp, randomIp, STRONG_PASSWORD, TestApp, uniqueEmail } from '../../setup/app';

/**
 * users, user_sessions and agent_actions carry no foreign key to the rows every request of a
 * tenant shares (tenant, API key, agent client; migration HotParentKeys): an insert locks no
 * shared row. What those keys did on delete, triggers on the parents still do.
 */
describe('rows written on every sign-in and exchange, and the tenant, key and agent rows they name', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(() => t.close());

  const anon = (apiKey: string) => t.http().post('/v1/auth/anonymous').set('X-API-Key', apiKey).set('X-Forwarded-For', randomIp()).send({});
  const register = (apiKey: string) =>
    t.http().post('/v1/auth/register').set('X-API-Key', apiKey).set('X-Forwarded-For', randomIp()).send({ email: uniqueEmail(), password: STRONG_PASSWORD, consent: true });
  const count = async (sql: string, params: unknown[]) => (await t.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${sql}`, params))[0].n;

  it('a guest sign-in and a password sign-in lock neither their tenant row nor their API key row', async () => {
    const tenant = await createTenant(t.db, { anonymous_signins_enabled: true });
    await anon(tenant.apiKey).expect(201); // the tenant's monthly counter row exists
    const email = uniqueEmail();
    await t.http().post('/v1/auth/register').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', randomIp()).send({ email, password: STRONG_PASSWORD, consent: true }).expect(201);
    const login = () => t.http().post('/v1/auth/login').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', randomIp()).send({ email, password: STRONG_PASSWORD });
    // FOR UPDATE conflicts with the FOR KEY SHARE lock a foreign-key check takes on its parent row
    const holder = await t.db.pool.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT 1 FROM tenants WHERE id = $1 FOR UPDATE', [tenant.id]);
      await holder.query('SELECT 1 FROM api_keys WHERE id = $1 FOR UPDATE', [tenant.apiKeyId]);
      await holder.query(`SET LOCAL lock_timeout = '5s'`);
      const settled = await Promise.race([
        Promise.all([anon(tenant.apiKey), login()]),
        new Promise<'waiting'>((r) => setTimeout(() => r('waiting'), 3000)),
      ]);
      expect(settled).not.toBe('waiting');
      if (settled !== 'waiting') expect(settled.map((r) => r.status)).toEqual([201, 200]);
    } finally {
      await holder.query('ROLLBACK');
      holder.release();
    }
  });

  it('deleting a tenant by hand deletes its users, their sessions and refresh tokens, and its agents’ actions', async () => {
    const tenant = await createTenant(t.db, { anonymous_signins_enabled: true });
    const other = await createTenant(t.db, { anonymous_signins_enabled: true });
    const guests = [(await anon(tenant.apiKey).expect(201)).body, (await register(tenant.apiKey).expect(201)).body];
    const kept = (await anon(other.apiKey).expect(201)).body;
    const agent = await createAgent(t.db, tenant.id);
    await t.db.query(`INSERT INTO agent_actions (tenant_id, agent_client_id, action) VALUES ($1, $2, 'token_exchange')`, [tenant.id, agent.id]);
    const ids = guests.map((g) => g.user.id as string);
    await t.db.query(`DELETE FROM tenants WHERE id = $1`, [tenant.id]);
    expect(await count(`users WHERE id = ANY($1) OR tenant_id = $2`, [ids, tenant.id])).toBe(0);
    expect(await count(`user_sessions WHERE user_id = ANY($1) OR tenant_id = $2`, [ids, tenant.id])).toBe(0);
    expect(await count(`refresh_tokens WHERE user_id = ANY($1) OR tenant_id = $2`, [ids, tenant.id])).toBe(0);
    expect(await count(`agent_actions WHERE tenant_id = $1`, [tenant.id])).toBe(0);
    // another tenant's rows are untouched
    expect(await count(`users u JOIN user_sessions s ON s.user_id = u.id WHERE u.id = $1`, [kept.user.id])).toBe(1);
  });

  it('deleting an API key by hand clears the references to it; deleting an agent client deletes its actions', async () => {
    const tenant = await createTenant(t.db, { anonymous_signins_enabled: true });
    const g = (await anon(tenant.apiKey).expect(201)).body;
    expect(await count(`users WHERE id = $1 AND created_by_api_key_id = $2`, [g.user.id, tenant.apiKeyId])).toBe(1);
    expect(await count(`user_sessions WHERE user_id = $1 AND api_key_id = $2`, [g.user.id, tenant.apiKeyId])).toBe(1);
    await t.db.query(`DELETE FROM api_keys WHERE id = $1`, [tenant.apiKeyId]);
    expect(await count(`users WHERE id = $1 AND created_by_api_key_id IS NULL`, [g.user.id])).toBe(1);
    expect(await count(`user_sessions WHERE user_id = $1 AND api_key_id IS NULL`, [g.user.id])).toBe(1);

    const [a, b] = [await createAgent(t.db, tenant.id), await createAgent(t.db, tenant.id)];
    for (const agent of [a, b]) await t.db.query(`INSERT INTO agent_actions (tenant_id, agent_client_id, action) VALUES ($1, $2, 'token_exchange')`, [tenant.id, agent.id]);
    await t.db.query(`DELETE FROM agent_clients WHERE id = $1`, [a.id]);
    expect(await count(`agent_actions WHERE agent_client_id = $1`, [a.id])).toBe(0);
    expect(await count(`agent_actions WHERE agent_client_id = $1`, [b.id])).toBe(1);
  });
});
