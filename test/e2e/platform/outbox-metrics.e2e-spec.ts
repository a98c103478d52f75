import { TestApp } from '../../setup/app';
import { createIsolatedTestApp } from '../../setup/isolated-db';

/**
 * The worker has no HTTP port: GET /metrics shows its backlog as the database holds it, so an
 * operator can alert on a relay that is down (rows never dispatched) or deliveries that do not
 * settle. A database of the test's own (no worker runs against it: rows stay where they are put).
 */
describe('GET /metrics: the outbox backlog', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createIsolatedTestApp();
  });
  afterAll(() => t.close());

  const gauges = async (): Promise<Record<string, number>> => {
    const text = (await t.http().get('/metrics').expect(200)).text;
    const out: Record<string, number> = {};
    for (const m of text.matchAll(/^(authp_outbox_backlog_\w+)\{topic="(\w+)",state="(\w+)"\} (\S+)$/gm)) out[`${m[1]} ${m[2]} ${m[3]}`] = Number(m[4]);
    return out;
  };

  it('rows waiting, by topic and state, and the age of the oldest: 0 when none waits', async () => {
    expect(await gauges()).toEqual({
      'authp_outbox_backlog_rows email undispatched': 0,
      'authp_outbox_backlog_rows webhook undispatched': 0,
      'authp_outbox_backlog_rows email unsettled': 0,
      'authp_outbox_backlog_rows webhook unsettled': 0,
      'authp_outbox_backlog_oldest_seconds email undispatched': 0,
      'authp_outbox_backlog_oldest_seconds webhook undispatched': 0,
      'authp_outbox_backlog_oldest_seconds email unsettled': 0,
      'authp_outbox_backlog_oldest_seconds webhook unsettled': 0,
    });
    // a relay that stopped 10 minutes ago, and a webhook event relayed an hour ago that never settled
    await t.db.query(
      `INSERT INTO outbox (topic, event_type, payload, created_at, dispatched_at, processed_at) VALUES
         ('email', 'mail', '{}', now() - interval '600 seconds', NULL, NULL),
         ('email', 'mail', '{}', now() - interval '60 seconds', NULL, NULL),
         ('webhook', 'user.deleted', '{}', now() - interval '3700 seconds', now() - interval '3600 seconds', NULL),
         ('webhook', 'user.deleted', '{}', now() - interval '3700 seconds', now() - interval '3600 seconds', now())`,
    );
    const g = await gauges();
    expect(g['authp_outbox_backlog_rows email undispatched']).toBe(2);
    expect(g['authp_outbox_backlog_oldest_seconds email undispatched']).toBeGreaterThanOrEqual(600);
    expect(g['authp_outbox_backlog_oldest_seconds email undispatched']).toBeLessThan(700);
    expect(g['authp_outbox_backlog_rows webhook unsettled']).toBe(1);
    expect(g['authp_outbox_backlog_oldest_seconds webhook unsettled']).toBeGreaterThanOrEqual(3600);
    expect([g['authp_outbox_backlog_rows webhook undispatched'], g['authp_outbox_backlog_rows email unsettled']]).toEqual([0, 0]);
    // the rest of the scrape is there, and valid: one TYPE line per metric name
    const text = (await t.http().get('/metrics').expect(200)).text;
    expect(text).toMatch(/^http_requests_total\{/m);
    const types = [...text.matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1]);
    expect(new Set(types).size).toBe(types.length);
  });
});
