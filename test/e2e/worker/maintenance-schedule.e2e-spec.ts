import { INestApplicationContext, Logger } from '@nestjs/common';
import { Queue } from 'bullmq';
import { GUEST_PURGE_CATCH_UP_AFTER_MS, GUEST_PURGE_JOB, GUEST_PURGE_PATTERN, GUEST_PURGE_SCHEDULER_ID } from '../../../src/modules/guests/purge/guest-purge.scheduler';
import { EXPIRED_ROWS_SCHEDULER_ID } from '../../../src/shared/maintenance/expired-rows.sweeper';
import { catchUpJobId, LEASE_HELD_MARGIN_MS, MAINTENANCE_JOB_OPTIONS, MAINTENANCE_QUEUE, MaintenanceScheduler, maintenanceJobHolder } from '../../../src/shared/maintenance/maintenance.scheduler';
import { bullConnection, bullPrefix } from '../../../src/shared/outbox/bull-options';
import { QueueReconciler } from '../../../src/shared/outbox/queue-reconciler';
import { createTenant, TenantFixture } from '../../factories/tenant.factory';
import { createTestApp, TestApp } from '../../setup/app';
import { createIsolatedDatabase, IsolatedDatabase } from '../../setup/isolated-db';
import { startWorkerWith } from '../../setup/worker';
import { eventually, sleep } from '../webhooks/webhook-helpers';

/**
 * The maintenance schedules across worker restarts: a run that fell due while no worker was up
 * is not dropped by the next start, a purge that has not completed for 26 hours runs at once
 * (once however many workers start, recorded once), a run's retry reclaims the lease its own
 * earlier attempt left, a run that finds another holder's lease is put back until it ends (not
 * completed, not recorded), schedules this release does not declare are removed (at start
 * and on every reconciler pass), a job of another release is put back rather than failed.
 */
describe('worker maintenance: schedules across restarts', () => {
  let isolated: IsolatedDatabase;
  let t: TestApp;
  let queue: Queue;
  const prefix = bullPrefix({ REDIS_KEY_PREFIX: process.env.REDIS_KEY_PREFIX as string });
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
  const lastPurge = async () => (await t.db.query<{ at: Date | null }>(`SELECT last_completed_at AS at FROM maintenance_runs WHERE job = $1`, [GUEST_PURGE_JOB]))[0]?.at;
  /** Sets the purge's last completed run `hours` ago. */
  const purgedHoursAgo = (hours: number) =>
    t.db.query(
      `INSERT INTO maintenance_runs (job, last_completed_at) VALUES ($1, now() - make_interval(hours => $2))
       ON CONFLICT (job) DO UPDATE SET last_completed_at = EXCLUDED.last_completed_at, running_until = NULL, holder = NULL`,
      [GUEST_PURGE_JOB, hours],
    );
  /** Resolves once the catch-up job has run (or was never queued); it is removed when it completes. */
  const catchUpDone = () => eventually(async () => !(await queue.getJob(catchUpJobId(GUEST_PURGE_JOB))), 15_000, 'the catch-up job to finish');

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

  it('a worker that finds no purge completed within 26 hours runs one at once, once however many workers start, recorded once', async () => {
    const tenant = await createTenant(t.db, { anonymous_signins_enabled: true, anonymous_user_ttl_days: 30 });
    await staleGuests(tenant, 1003);
    await purgedHoursAgo(27);
    // every write of a completed run
    await t.db.query(`CREATE TABLE IF NOT EXISTS test_run_records (job text, at timestamptz)`);
    await t.db.query(`TRUNCATE test_run_records`);
    await t.db.query(`CREATE OR REPLACE FUNCTION test_run_record() RETURNS trigger LANGUAGE plpgsql AS $$
                      BEGIN INSERT INTO test_run_records VALUES (NEW.job, NEW.last_completed_at); RETURN NEW; END $$`);
    await t.db.query(`CREATE OR REPLACE TRIGGER test_run_record AFTER INSERT OR UPDATE OF last_completed_at ON maintenance_runs FOR EACH ROW
                      WHEN (NEW.last_completed_at IS NOT NULL) EXECUTE FUNCTION test_run_record()`);
    await Promise.all([start(), start()]);
    await eventually(async () => (await guestsLeft(tenant)) === 3, 15_000, 'the catch-up purge');
    // recorded once the run has finished (sessions marked ended, profiles invalidated), not as its deletes commit
    const at = await eventually(async () => {
      const last = await lastPurge();
      return last && Date.now() - last.getTime() < 60_000 && last;
    }, 10_000, 'the catch-up purge to be recorded');
    expect(at).toBeInstanceOf(Date);
    // one run, not one per worker (a second would take the last 3), and no second one at the next start
    await sleep(1000);
    await start();
    await sleep(1000);
    expect(await guestsLeft(tenant)).toBe(3);
    const audits = await t.db.query(`SELECT 1 FROM audit_events WHERE tenant_id = $1 AND type = 'guests.purged'`, [tenant.id]);
    expect(audits).toHaveLength(1);
    expect(await t.db.query(`SELECT 1 FROM test_run_records WHERE job = $1`, [GUEST_PURGE_JOB])).toHaveLength(1);
    await t.db.query(`DROP TRIGGER test_run_record ON maintenance_runs`);
    // the daily schedule is still there, next at 02:30 UTC
    const s = await queue.getJobScheduler(GUEST_PURGE_SCHEDULER_ID);
    expect(s?.pattern).toBe(GUEST_PURGE_PATTERN);
    expect(new Date(s!.next!).getUTCHours()).toBe(2);
  }, 60_000);

  it('a purge completed 25 hours ago (today\'s 02:30 run still under way) queues no catch-up', async () => {
    const tenant = await createTenant(t.db, { anonymous_signins_enabled: true, anonymous_user_ttl_days: 30 });
    await staleGuests(tenant, 2);
    await purgedHoursAgo(25);
    const before = await lastPurge();
    const w = await start();
    expect(await w.get(MaintenanceScheduler).catchUp()).toBe(0);
    await sleep(1000);
    expect(await guestsLeft(tenant)).toBe(2);
    expect(await lastPurge()).toEqual(before);
    expect(GUEST_PURGE_CATCH_UP_AFTER_MS).toBe(26 * 3600_000);
  }, 30_000);

  /** Puts the purge's lease in `holder`'s hands for `ms` more (a run under way, or left by a holder that died). */
  const leaseHeldBy = (holder: string, ms: number) =>
    t.db.query(`UPDATE maintenance_runs SET holder = $2, running_until = now() + make_interval(secs => $3::double precision / 1000) WHERE job = $1`, [GUEST_PURGE_JOB, holder, ms]);
  const leaseRow = async () =>
    (await t.db.query<{ holder: string | null; running_until: Date | null }>(`SELECT holder, running_until FROM maintenance_runs WHERE job = $1`, [GUEST_PURGE_JOB]))[0];
  const recentlyRecorded = () =>
    eventually(async () => {
      const last = await lastPurge();
      return last && Date.now() - last.getTime() < 60_000;
    }, 10_000, 'the purge to be recorded');

  it("a catch-up whose job's own earlier attempt left the lease (its worker died mid-run) reclaims it at once: it runs and is recorded", async () => {
    const tenant = await createTenant(t.db, { anonymous_signins_enabled: true, anonymous_user_ttl_days: 30 });
    await staleGuests(tenant, 2);
    await purgedHoursAgo(27);
    const before = await lastPurge();
    // the lease of the catch-up job's attempt whose worker died, still running for an hour
    await leaseHeldBy(maintenanceJobHolder(prefix, catchUpJobId(GUEST_PURGE_JOB)), 3600_000);
    await start();
    await eventually(async () => (await guestsLeft(tenant)) === 0, 15_000, 'the catch-up purge');
    await recentlyRecorded();
    expect(await lastPurge()).not.toEqual(before);
    expect(await leaseRow()).toMatchObject({ holder: null, running_until: null });
    await catchUpDone();
  }, 40_000);

  /**
   * The delayed job has been put back until the lease it found ends, plus LEASE_HELD_MARGIN_MS:
   * its delay is at least what is left of that lease now (plus the margin), and no more than the
   * whole lease plus the margin.
   */
  async function expectPutBackUntilTheLeaseEnds(delay: number, leaseMs: number): Promise<void> {
    const [{ left }] = await t.db.query<{ left: number }>(
      `SELECT ceil(extract(epoch FROM running_until - now()) * 1000)::int AS left FROM maintenance_runs WHERE job = $1`,
      [GUEST_PURGE_JOB],
    );
    expect(delay).toBeGreaterThanOrEqual(left + LEASE_HELD_MARGIN_MS - 1000);
    expect(delay).toBeLessThanOrEqual(leaseMs + LEASE_HELD_MARGIN_MS + 1000);
  }

  // The other holder's lease lasts an hour, not seconds: the job must find it still held however
  // long the worker takes to start and to pick the job up. The test then ends that lease itself
  // and brings the put-back job forward (it waits an hour plus the margin otherwise).
  const HELD_MS = 3_600_000;

  it('a catch-up that finds the lease held by another holder (a CLI run) is put back, not completed, and not recorded; it runs once that lease has ended', async () => {
    const tenant = await createTenant(t.db, { anonymous_signins_enabled: true, anonymous_user_ttl_days: 30 });
    await staleGuests(tenant, 2);
    await purgedHoursAgo(27);
    const before = await lastPurge();
    // a CLI run (or another worker's) under way, on whatever connection
    await leaseHeldBy('cli-elsewhere', HELD_MS);
    const w = await start();
    await eventually(async () => (await queue.getJob(catchUpJobId(GUEST_PURGE_JOB)))?.getState().then((s) => s === 'delayed'), 10_000, 'the catch-up to be put back');
    const job = (await queue.getJob(catchUpJobId(GUEST_PURGE_JOB)))!;
    expect(job.attemptsMade).toBe(0); // no failed attempt spent
    // until that lease ends (plus the margin), not for some fixed time
    await expectPutBackUntilTheLeaseEnds(Number(job.delay), HELD_MS);
    expect(await guestsLeft(tenant)).toBe(2);
    expect(await lastPurge()).toEqual(before);
    expect(await leaseRow()).toMatchObject({ holder: 'cli-elsewhere' });
    // still queued: a reconciler pass queues no second one
    expect(await w.get(MaintenanceScheduler).catchUp()).toBe(0);
    // the lease ends (its holder finished without recording: withRunLease clears it), and the
    // job's time comes: the catch-up runs
    await t.db.query(`UPDATE maintenance_runs SET holder = NULL, running_until = NULL WHERE job = $1`, [GUEST_PURGE_JOB]);
    await job.promote();
    await eventually(async () => (await guestsLeft(tenant)) === 0, 20_000, 'the catch-up purge');
    await recentlyRecorded();
    await catchUpDone();
  }, 40_000);

  it('a scheduled run that finds the lease held by another holder is put back (neither completed nor failed) and runs once that lease has ended; a holder that died leaves a lease that expires', async () => {
    const tenant = await createTenant(t.db, { anonymous_signins_enabled: true, anonymous_user_ttl_days: 30 });
    await staleGuests(tenant, 2);
    await purgedHoursAgo(1); // no catch-up due: only the scheduled occurrence runs
    const before = await lastPurge();
    await start();
    await leaseHeldBy('dead-cli-run', HELD_MS);
    // the day's occurrence falling due (as the job scheduler adds it)
    const job = await queue.add(GUEST_PURGE_JOB, {}, { ...MAINTENANCE_JOB_OPTIONS, jobId: `scheduled-${Date.now()}` });
    await eventually(async () => (await job.getState()) === 'delayed', 10_000, 'the scheduled run to be put back');
    const put = (await queue.getJob(job.id!))!;
    expect(put.attemptsMade).toBe(0); // not failed
    await expectPutBackUntilTheLeaseEnds(Number(put.delay), HELD_MS);
    expect(await queue.getJobState(job.id!)).not.toBe('completed');
    expect(await guestsLeft(tenant)).toBe(2);
    expect(await lastPurge()).toEqual(before);
    // its holder died: nobody clears the lease, it only runs out (left as it was, just expired)
    await t.db.query(`UPDATE maintenance_runs SET running_until = now() - interval '1 second' WHERE job = $1 AND holder = 'dead-cli-run'`, [GUEST_PURGE_JOB]);
    await put.promote();
    await eventually(async () => (await queue.getJobState(job.id!)) === 'completed', 20_000, 'the scheduled run to complete');
    expect(await guestsLeft(tenant)).toBe(0);
    await recentlyRecorded();
    expect(await leaseRow()).toMatchObject({ holder: null, running_until: null });
  }, 40_000);

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

  it('a schedule another release re-creates during a rolling deploy (its reconciler pass) is removed again by the next pass', async () => {
    const w = await start();
    // an old worker's pass puts back the schedule its release declares
    await queue.upsertJobScheduler('retired-job-daily', { pattern: '0 3 * * *', tz: 'UTC' }, { name: 'retired-job' });
    await w.get(QueueReconciler).runOnce();
    const ids = (await queue.getJobSchedulers(0, -1)).map((s) => s.id ?? s.key).sort();
    expect(ids).toEqual([EXPIRED_ROWS_SCHEDULER_ID, GUEST_PURGE_SCHEDULER_ID].sort());
    expect((await queue.getDelayed()).filter((j) => j.name === 'retired-job')).toHaveLength(0);
  }, 30_000);

  it('a schedule whose pattern another release (or a hand) changed while workers run is put back by the next reconciler pass, not only at a start', async () => {
    const w = await start();
    await queue.upsertJobScheduler(GUEST_PURGE_SCHEDULER_ID, { pattern: '45 2 * * *', tz: 'UTC' }, { name: GUEST_PURGE_JOB, opts: { removeOnComplete: 100, removeOnFail: 100 } });
    await w.get(QueueReconciler).runOnce();
    const purge = await queue.getJobScheduler(GUEST_PURGE_SCHEDULER_ID);
    expect(purge?.pattern).toBe(GUEST_PURGE_PATTERN);
    expect(purge?.template?.opts?.attempts).toBeGreaterThan(1);
    // an unchanged schedule is left alone: its pending occurrence stays the same job
    const pending = (await queue.getDelayed()).filter((j) => j.name === GUEST_PURGE_JOB).map((j) => j.id);
    await w.get(QueueReconciler).runOnce();
    expect((await queue.getDelayed()).filter((j) => j.name === GUEST_PURGE_JOB).map((j) => j.id)).toEqual(pending);
  }, 30_000);

  it('a maintenance job of a name this release does not know (another release) is put back, not failed', async () => {
    await start();
    const job = await queue.add('job-of-a-newer-release', {}, { removeOnComplete: 100, removeOnFail: 100 });
    await eventually(async () => (await queue.getJobState(job.id!)) === 'delayed', 10_000, 'the unknown job to be put back');
    await sleep(300);
    expect(await queue.getJobState(job.id!)).toBe('delayed');
    await job.remove();
  }, 30_000);

  it('a first start on a new database (no maintenance run recorded) logs the schedules it creates and the first purge at info; once a run is recorded, the same findings are warnings', async () => {
    const log = jest.spyOn(Logger.prototype, 'log');
    const warn = jest.spyOn(Logger.prototype, 'warn');
    const said = (spy: jest.SpyInstance) => spy.mock.calls.map((c) => String(c[0]));
    const LOSS = /was missing from Redis|has not completed within/;
    try {
      await t.db.query(`DELETE FROM maintenance_runs`);
      for (const id of [GUEST_PURGE_SCHEDULER_ID, EXPIRED_ROWS_SCHEDULER_ID]) await queue.removeJobScheduler(id);
      await start();
      await catchUpDone();
      expect(said(log)).toEqual(
        expect.arrayContaining([
          `job schedule ${GUEST_PURGE_SCHEDULER_ID} created (first worker start on this database)`,
          `job schedule ${EXPIRED_ROWS_SCHEDULER_ID} created (first worker start on this database)`,
          `maintenance job ${GUEST_PURGE_JOB} has never run on this database: running it now`,
        ]),
      );
      expect(said(warn).filter((m) => LOSS.test(m))).toEqual([]);
      await recentlyRecorded();
      await stopAll();
      // Redis lost a schedule, the purge is overdue: warnings
      await queue.removeJobScheduler(GUEST_PURGE_SCHEDULER_ID);
      await purgedHoursAgo(27);
      warn.mockClear();
      await start();
      await catchUpDone();
      expect(said(warn)).toEqual(
        expect.arrayContaining([
          `job schedule ${GUEST_PURGE_SCHEDULER_ID} was missing from Redis: created`,
          `maintenance job ${GUEST_PURGE_JOB} has not completed within ${GUEST_PURGE_CATCH_UP_AFTER_MS} ms: running it now`,
        ]),
      );
    } finally {
      log.mockRestore();
      warn.mockRestore();
    }
  }, 60_000);
});
