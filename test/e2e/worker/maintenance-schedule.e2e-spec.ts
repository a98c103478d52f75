import { INestApplicationContext } from '@nestjs/common';
import { Queue } from 'bullmq';
import { GUEST_PURGE_JOB, GUEST_PURGE_PATTERN, GUEST_PURGE_SCHEDULER_ID } from '../../../src/modules/guests/purge/guest-purge.scheduler';
import { EXPIRED_ROWS_SCHEDULER_ID } from '../../../src/shared/maintenance/expired-rows.sweeper';
import { MAINTENANCE_QUEUE } from '../../../src/shared/maintenance/maintenance.scheduler';
import { bullConnection, bullPrefix } from '../../../src/shared/outbox/bull-options';
import { createTenant, TenantFixture } from '../../factories/tenant.factory';
import { createTestApp, TestApp } from '../../setup/app';
import { createIsolatedDatabase, IsolatedDatabase } from '../../setup/isolated-db';
import { startWorkerWith } from '../../setup/worker';
import { eventually, sleep } from '../webhooks/webhook-helpers';

/**
 * The maintenance schedules across worker restarts: a run that fell due while no worker was up
 * is not dropped by the next start, a purge that has not completed for a day runs at once (once
 * however many workers start), schedules this release does not declare are removed, a job of
 * another release is put back rather than failed.
 */
describe('worker maintenance: schedules across restarts', () => {
  let isolated: IsolatedDatabase;
  let t: TestApp;
  let queue: Queue;
  const workers: INestApplicationContext[] = [];
  const ENV = () => ({ DATABASE_URL: isolated.url, OUTBOX_POLL_MS: '50', QUEUE_RECONCILE_SECONDS: '3600' });
  const start = async () => {
    const w = await startWorkerWith(ENV());
    workers.push(w);
    return w;
  };
  const stopAll = async () => {
    for (const w of workers.splice(0)) await w.close();
  };

  async function staleGuests(tenant: TenantFixture, n: number): Promise<void> {
    await t.db.query(
      `WITH u AS (
         INSERT INTO users (tenant_id, is_anonymous, last_active_at, created_at)
         SELECT $1, true, now() - interval '45 days', now() - interval '45 days' FROM generate_series(1, $2) RETURNING id
       )
       INSERT INTO user_sessions (tenant_id, user_id) SELECT $1, id FROM u`,
      [tenant.id, n],
    );
  }
  const guestsLeft = async (tenant: TenantFixture) =>
    (await t.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM users WHERE tenant_id = $1 AND is_anonymous`, [tenant.id]))[0].n;
  const lastPurge = async () => (await t.db.query<{ at: Date }>(`SELECT last_completed_at AS at FROM maintenance_runs WHERE job = $1`, [GUEST_PURGE_JOB]))[0]?.at;

  beforeAll(async () => {
    isolated = await createIsolatedDatabase();
    t = await createTestApp({ DATABASE_URL: isolated.url });
    queue = new Queue(MAINTENANCE_QUEUE, { connection: bullConnection({ REDIS_URL: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' }), prefix: bullPrefix({ REDIS_KEY_PREFIX: process.env.REDIS_KEY_PREFIX as string }) });
  }, 60_000);

  afterEach(stopAll);

  afterAll(async () => {
    await stopAll();
    await queue?.close();
    await t?.close();
    await isolated?.drop();
  });

  it('a worker that finds no purge completed within a day runs one at once, once however many workers start', async () => {
    const tenant = await createTenant(t.db, { anonymous_signins_enabled: true, anonymous_user_ttl_days: 30 });
    await staleGuests(tenant, 1003);
    await t.db.query(`INSERT INTO maintenance_runs (job, last_completed_at) VALUES ($1, now() - interval '25 hours')
                      ON CONFLICT (job) DO UPDATE SET last_completed_at = EXCLUDED.last_completed_at`, [GUEST_PURGE_JOB]);
    await Promise.all([start(), start()]);
    await eventually(async () => (await guestsLeft(tenant)) === 3, 15_000, 'the catch-up purge');
    expect(await lastPurge()).toBeInstanceOf(Date);
    expect(Date.now() - (await lastPurge()).getTime()).toBeLessThan(60_000);
    // one run, not one per worker (a second would take the last 3), and no second one at the next start
    await sleep(1000);
    await start();
    await sleep(1000);
    expect(await guestsLeft(tenant)).toBe(3);
    const audits = await t.db.query(`SELECT 1 FROM audit_events WHERE tenant_id = $1 AND type = 'guests.purged'`, [tenant.id]);
    expect(audits).toHaveLength(1);
    // the daily schedule is still there, next at 02:30 UTC
    const s = await queue.getJobScheduler(GUEST_PURGE_SCHEDULER_ID);
    expect(s?.pattern).toBe(GUEST_PURGE_PATTERN);
    expect(new Date(s!.next!).getUTCHours()).toBe(2);
  }, 60_000);

  it('a scheduled run that fell due while no worker was up runs when one starts (the start does not replace the schedule)', async () => {
    await start();
    await eventually(lastPurge, 10_000, 'the first purge');
    await stopAll();
    const tenant = await createTenant(t.db, { anonymous_signins_enabled: true, anonymous_user_ttl_days: 30 });
    await staleGuests(tenant, 2);
    // the purge's pending occurrence falls due now, while no worker runs (as if it were 02:30)
    const pending = (await queue.getDelayed()).filter((j) => j.name === GUEST_PURGE_JOB);
    expect(pending).toHaveLength(1);
    await pending[0].changeDelay(1);
    await sleep(50);
    await start();
    await eventually(async () => (await guestsLeft(tenant)) === 0, 15_000, 'the overdue purge to run');
    // and the schedule goes on: one pending occurrence, in the future
    await eventually(async () => (await queue.getDelayed()).some((j) => j.name === GUEST_PURGE_JOB && j.timestamp + j.delay > Date.now()), 5_000, 'the next occurrence');
  }, 60_000);

  it('a schedule whose pattern changed is replaced; schedules this release does not declare are removed; maintenance jobs retry', async () => {
    await queue.upsertJobScheduler(GUEST_PURGE_SCHEDULER_ID, { pattern: '0 4 * * *', tz: 'UTC' }, { name: GUEST_PURGE_JOB, opts: { removeOnComplete: 100, removeOnFail: 100 } });
    await queue.upsertJobScheduler('retired-job-daily', { pattern: '0 3 * * *', tz: 'UTC' }, { name: 'retired-job' });
    await start();
    const ids = (await queue.getJobSchedulers(0, -1)).map((s) => s.id ?? s.key).sort();
    expect(ids).toEqual([EXPIRED_ROWS_SCHEDULER_ID, GUEST_PURGE_SCHEDULER_ID].sort());
    const purge = await queue.getJobScheduler(GUEST_PURGE_SCHEDULER_ID);
    expect(purge?.pattern).toBe(GUEST_PURGE_PATTERN);
    for (const id of [GUEST_PURGE_SCHEDULER_ID, EXPIRED_ROWS_SCHEDULER_ID]) {
      const opts = (await queue.getJobScheduler(id))?.template?.opts;
      expect(opts?.attempts).toBeGreaterThan(1);
      expect(opts?.backoff).toBeDefined();
    }
  }, 30_000);

  it('a maintenance job of a name this release does not know (another release) is put back, not failed', async () => {
    await start();
    const job = await queue.add('job-of-a-newer-release', {}, { removeOnComplete: 100, removeOnFail: 100 });
    await eventually(async () => (await queue.getJobState(job.id!)) === 'delayed', 10_000, 'the unknown job to be put back');
    await sleep(300);
    expect(await queue.getJobState(job.id!)).toBe('delayed');
    await job.remove();
  }, 30_000);
});
