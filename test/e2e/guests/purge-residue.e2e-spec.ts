import { GuestPurgeService } from '../../../src/modules/guests/purge/guest-purge.service';
import { randomIp, TestApp } from '../../setup/app';
import { createIsolatedTestApp } from '../../setup/isolated-db';
import { createTenant } from '../../factories/tenant.factory';
import { createAgent } from '../../factories/agent.factory';

// issue 3 item 7: the purge hard-deletes a guest "with their sessions and refresh tokens":
// nothing else keyed by the guest's id is left behind
let t: TestApp & { databaseUrl: string };
beforeAll(async () => { t = await createIsolatedTestApp(); }, 60_000);
afterAll(() => t?.close());

it('after the purge no table except the audit log and outbox holds the purged guest id', async () => {
  const tenant = await createTenant(t.db, { anonymous_signins_enabled: true, anonymous_user_ttl_days: 30, tier: 'pro' });
  const agent = await createAgent(t.db, tenant.id);
  const g = await t.http().post('/v1/auth/anonymous').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', randomIp()).send({ public_metadata: { cart: ['x'] } }).expect(201);
  const bearer = `Bearer ${g.body.access_token}`;
  await t.http().get('/v1/auth/me').set('Authorization', bearer).expect(200);
  await t.http().delete(`/v1/users/me/agents/${agent.id}`).set('Authorization', bearer).expect(200);
  await t.http().post('/v1/auth/refresh').set('X-API-Key', tenant.apiKey).send({ refresh_token: g.body.refresh_token }).expect(200);
  await t.db.query(`UPDATE users SET last_active_at = now() - interval '40 days' WHERE id = $1`, [g.body.user.id]);
  const r = await t.app.get(GuestPurgeService).runOnce();
  expect(r.perTenant.find((x) => x.tenantId === tenant.id)?.deleted).toBe(1);
  const tables = await t.db.query<{ table_name: string }>(`SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' AND table_name NOT IN ('audit_events', 'outbox', 'outbox_events', 'migrations')`);
  const hits: string[] = [];
  for (const { table_name } of tables) {
    const rows = await t.db.query(`SELECT x::text AS row FROM "${table_name}" x WHERE position($1 in x::text) > 0 LIMIT 3`, [g.body.user.id]);
    for (const row of rows) hits.push(`${table_name}: ${String((row as { row: string }).row).slice(0, 200)}`);
  }
  expect(hits).toEqual([]);
});
