import { QueryRunner } from 'typeorm';
import { AgentLogoCanonical1766100000000 } from '../../../migrations/1766100000000-agent-logo-canonical';
import { createAgent } from '../../factories/agent.factory';
import { createTenant } from '../../factories/tenant.factory';
import { createTestApp, TestApp } from '../../setup/app';

/**
 * Migration 1766100000000: logo URLs stored before they were canonicalized are rewritten in the
 * URL parser's spelling; one the current rule refuses is cleared; a canonical one is untouched.
 */
describe('migration: agents\' logo URLs stored canonical', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(() => t.close());

  it('rewrites typed spellings, clears refused ones, leaves canonical ones and nulls', async () => {
    const tenant = await createTenant(t.db, { tier: 'pro' });
    const cases: [string | null, string | null][] = [
      ['HTTPS://CDN.Example.com/a"><img/src=x>/é.png', 'https://cdn.example.com/a%22%3E%3Cimg/src=x%3E/%C3%A9.png'],
      ['\u0001 https://exa\nmple.com/a.png', null],
      ['https://cdn.example.com/l\u202egnp.png', null],
      ['https://cdn.example.com/ok.png', 'https://cdn.example.com/ok.png'],
      [null, null],
    ];
    const ids: string[] = [];
    for (const [raw] of cases) {
      const a = await createAgent(t.db, tenant.id);
      await t.db.query(`UPDATE agent_clients SET logo_url = $2 WHERE id = $1`, [a.id, raw]);
      ids.push(a.id);
    }
    const runner = { query: (sql: string, params?: unknown[]) => t.db.query(sql, params) } as unknown as QueryRunner;
    await new AgentLogoCanonical1766100000000().up(runner);
    const rows = await t.db.query<{ id: string; logo_url: string | null }>(`SELECT id, logo_url FROM agent_clients WHERE id = ANY($1::uuid[])`, [ids]);
    expect(ids.map((id) => rows.find((r) => r.id === id)!.logo_url)).toEqual(cases.map(([, want]) => want));
  });
});
