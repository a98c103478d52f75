import { Inject, Injectable, Logger, Module, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { DelayedError, Job, JobSchedulerJson, JobsOptions, Queue, Worker } from 'bullmq';
import { APP_CONFIG, AppConfig } from '../../config/config';
import { Db } from '../db/db.service';
import { bullConnection, bullPrefix } from '../outbox/bull-options';
import { QueueReconciler } from '../outbox/queue-reconciler';
import { outageLog } from '../redis/outage-log';
import { maintenanceRunDue, RunLeaseHeldError } from './run-lock';
import { closeWorker } from '../outbox/close-worker';

export const MAINTENANCE_QUEUE = 'maintenance';

/** What a maintenance job's run is given by the worker. */
export interface MaintenanceRunContext {
  /**
   * The holder of its run's lease (withRunLease): its BullMQ job's, the same on every attempt of
   * the job, so a retry or a stalled re-run reclaims the lease its dead or failed attempt left.
   */
  holder: string;
}

/** The lease holder of a maintenance job's runs: the job's id on its queue (stable across its attempts). */
export const maintenanceJobHolder = (prefix: string, jobId: string) => `bullmq:${prefix}:${MAINTENANCE_QUEUE}:${jobId}`;

/** A recurring job of the worker: a fixed scheduler id, so however many workers run, BullMQ keeps one schedule and runs each occurrence once. */
export interface MaintenanceJob {
  name: string;
  schedulerId: string;
  /** cron pattern, UTC */
  pattern: string;
  /**
   * The run. When its lease is held by another holder (RunLeaseHeldError: a CLI run, another
   * occurrence's run), the job is put back until that lease ends, not completed.
   */
  run: (ctx: MaintenanceRunContext) => Promise<unknown>;
  /**
   * Catch-up: when the job has not completed within this many ms (maintenance_runs), the worker
   * runs it at once, at start and on every queue reconciler pass (a run that fell due while no
   * worker was up, or whose schedule was re-created, is not lost). Longer than the schedule's
   * period, so that a pass landing while the day's run is still under way queues no other. Such
   * a job records its own completed runs (withRunLease: a CLI run counts; a run put back because
   * another held the lease records nothing until it has run).
   */
  catchUpAfterMs?: number;
}

/** Retries of a failed maintenance run: 4 attempts, 1, 2, 4 minutes apart (then the next occurrence). */
export const MAINTENANCE_JOB_OPTIONS: JobsOptions = {
  removeOnComplete: 100,
  removeOnFail: 100,
  attempts: 4,
  backoff: { type: 'exponential', delay: 60_000 },
};
/**
 * A job of a name this release does not declare (a newer or older release's, during a rolling
 * deploy) is put back this long, up to UNKNOWN_JOB_DEFERRALS times, so that a worker that knows
 * it takes it; it fails only after that (about an hour).
 */
export const UNKNOWN_JOB_DELAY_MS = 5 * 60_000;
export const UNKNOWN_JOB_DEFERRALS = 12;
/**
 * A job whose run finds its lease held by another holder is put back until that lease ends plus
 * this margin (clock and renewal slack), then tried again: a live holder's run is waited for, a
 * dead holder's lease has expired by then. Such deferrals count no failed attempt; after
 * LEASE_HELD_DEFERRALS starts of the job (hours of a lease renewed by a live holder), the run
 * fails instead, through its retries (a final failure is logged; the catch-up covers a purge).
 */
export const LEASE_HELD_MARGIN_MS = 5_000;
export const LEASE_HELD_DEFERRALS = 30;

/** The job id of a job's catch-up run: one at a time however many workers add it. */
export const catchUpJobId = (name: string) => `catch-up-${name}`;

/** Key-order-independent JSON, to compare the options stored in Redis with the declared ones. */
function stable(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(stable).join(',')}]`;
  if (v && typeof v === 'object')
    return `{${Object.keys(v as object)
      .filter((k) => (v as Record<string, unknown>)[k] !== undefined)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${stable((v as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  return JSON.stringify(v);
}

/**
 * Worker-only: the `maintenance` queue, its job schedulers and its one consumer. Modules
 * register their jobs in `onModuleInit`; at start, once every module has, a schedule is created
 * when Redis lacks it and replaced only when its pattern or options changed: an unchanged one is
 * left alone, since replacing a cron schedule drops its pending run (one that fell due while no
 * worker was up would be skipped). Schedules on the queue this release does not declare (a job
 * removed or renamed) are deleted, at start and on every queue reconciler pass: during a rolling
 * deploy a worker of the other release re-creates its own on its passes, and the last such worker
 * gone, the next pass removes them for good.
 */
@Injectable()
export class MaintenanceScheduler implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger(MaintenanceScheduler.name);
  private readonly jobs = new Map<string, MaintenanceJob>();
  private queue?: Queue;
  private worker?: Worker;
  private prefix = '';

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly moduleRef: ModuleRef,
    private readonly db: Db,
  ) {}

  register(job: MaintenanceJob): void {
    this.jobs.set(job.name, job);
  }

  async onApplicationBootstrap(): Promise<void> {
    if (!this.jobs.size) return;
    const prefix = (this.prefix = bullPrefix(this.config));
    this.queue = new Queue(MAINTENANCE_QUEUE, { connection: bullConnection(this.config), prefix });
    this.queue.on('error', outageLog(this.logger, 'maintenance queue'));
    await this.ensureSchedules();
    // the worker's queue reconciler re-creates a schedule Redis lost (a restart without
    // persistence, a flush), instead of waiting for the next worker start, and runs an overdue job
    const reconciler = this.reconciler();
    reconciler?.register({ name: 'schedules', run: () => this.ensureSchedules() });
    reconciler?.register({ name: 'maintenance-catch-up', run: () => this.catchUp() });
    this.worker = new Worker(MAINTENANCE_QUEUE, (job, token) => this.process(job, token), { connection: bullConnection(this.config), prefix, concurrency: 1 });
    this.worker.on('failed', (job, err) => this.logger.error(`maintenance job ${job?.name} failed (attempt ${job?.attemptsMade}): ${err.message}`));
    this.worker.on('error', outageLog(this.logger, 'maintenance worker'));
    await this.catchUp().catch((e: Error) => this.logger.warn(`maintenance catch-up: ${e.message}`));
  }

  private async process(job: Job, token?: string): Promise<unknown> {
    const known = this.jobs.get(job.name);
    if (!known) {
      // another release's job: put back for a worker that knows it, then fail visibly
      if (token && job.attemptsStarted <= UNKNOWN_JOB_DEFERRALS) {
        this.logger.warn(`maintenance job ${job.name} is not known to this release: put back for ${UNKNOWN_JOB_DELAY_MS} ms`);
        await job.moveToDelayed(Date.now() + UNKNOWN_JOB_DELAY_MS, token);
        throw new DelayedError();
      }
      throw new Error(`unknown maintenance job ${job.name}`);
    }
    // a catch-up queued by a worker that read maintenance_runs before another's run completed
    if ((job.data as { catchUp?: boolean })?.catchUp && known.catchUpAfterMs && !(await maintenanceRunDue(this.db, known.name, known.catchUpAfterMs))) {
      return { skipped: 'ran meanwhile' };
    }
    try {
      return await known.run({ holder: maintenanceJobHolder(this.prefix, job.id!) });
    } catch (err) {
      if (!(err instanceof RunLeaseHeldError)) throw err;
      // another holder's run is under way (or its holder died and its lease has not expired):
      // never completed as if this one had run; tried again once that lease has ended
      if (!token || job.attemptsStarted > LEASE_HELD_DEFERRALS) throw err;
      const delay = err.heldForMs + LEASE_HELD_MARGIN_MS;
      this.logger.log(`maintenance job ${job.name}: another run holds its lease, put back for ${delay} ms`);
      await job.moveToDelayed(Date.now() + delay, token);
      throw new DelayedError();
    }
  }

  /** Deletes the schedules on the queue this release does not declare; returns how many. */
  private async removeUndeclared(): Promise<number> {
    const declared = new Set([...this.jobs.values()].map((j) => j.schedulerId));
    let n = 0;
    for (const s of await this.queue!.getJobSchedulers(0, -1)) {
      const id = s.id ?? s.key;
      if (declared.has(id) || declared.has(s.key)) continue;
      await this.queue!.removeJobScheduler(s.key);
      this.logger.log(`job schedule ${id} (${s.name}) is not declared by this release: removed`);
      n++;
    }
    return n;
  }

  /** Whether the schedule Redis holds is the declared one (pattern, zone, name, job options). */
  private matches(s: JobSchedulerJson, job: MaintenanceJob): boolean {
    return s.pattern === job.pattern && s.tz === 'UTC' && s.name === job.name && stable(s.template?.opts ?? {}) === stable(MAINTENANCE_JOB_OPTIONS);
  }

  /**
   * At start and on every reconciler pass: creates the schedules Redis does not hold (a restart
   * without persistence, a flush), replaces one whose pattern or options differ from this
   * release's (an unchanged one is left alone: replacing a cron schedule drops its pending run),
   * and deletes undeclared ones (another release's: its workers re-create them until they are
   * gone); returns how many it changed.
   */
  async ensureSchedules(): Promise<number> {
    if (!this.queue) return 0;
    let n = 0;
    let firstStart: boolean | undefined;
    for (const job of this.jobs.values()) {
      const current = await this.queue.getJobScheduler(job.schedulerId);
      if (current && this.matches(current, job)) continue;
      if (!current) firstStart ??= await this.neverRan();
      await this.upsert(job);
      if (current) this.logger.log(`job schedule ${job.schedulerId} differs from this release's: replaced`);
      else if (firstStart) this.logger.log(`job schedule ${job.schedulerId} created (first worker start on this database)`);
      else this.logger.warn(`job schedule ${job.schedulerId} was missing from Redis: created`);
      n++;
    }
    return n + (await this.removeUndeclared());
  }

  /**
   * Whether no maintenance run was ever recorded (maintenance_runs empty): a worker's first start
   * on this database, where a missing schedule or a never-completed job is expected, not a loss.
   * A query failure counts as not first (the warning stays).
   */
  private async neverRan(job?: string): Promise<boolean> {
    const rows = await this.db
      .query<{ never: boolean }>(`SELECT NOT EXISTS (SELECT 1 FROM maintenance_runs WHERE $1::text IS NULL OR job = $1) AS never`, [job ?? null])
      .catch(() => [{ never: false }]);
    return rows[0].never;
  }

  /**
   * Queues a run now of every job with a catch-up whose last completed run is older than its
   * catchUpAfterMs (under a fixed job id: several workers add one job). Returns how many it queued.
   */
  async catchUp(): Promise<number> {
    let n = 0;
    for (const job of this.jobs.values()) {
      if (!this.queue || !job.catchUpAfterMs || !(await maintenanceRunDue(this.db, job.name, job.catchUpAfterMs))) continue;
      const existing = await this.queue.getJob(catchUpJobId(job.name));
      if (existing && !(await existing.isCompleted()) && !(await existing.isFailed())) continue;
      // never run on this database (a first start): expected, not a run that was missed; asked
      // before queuing, which starts the run (and writes its row)
      const never = await this.neverRan(job.name);
      await existing?.remove().catch(() => undefined);
      await this.queue.add(job.name, { catchUp: true }, { ...MAINTENANCE_JOB_OPTIONS, jobId: catchUpJobId(job.name), removeOnComplete: true, removeOnFail: true });
      if (never) this.logger.log(`maintenance job ${job.name} has never run on this database: running it now`);
      else this.logger.warn(`maintenance job ${job.name} has not completed within ${job.catchUpAfterMs} ms: running it now`);
      n++;
    }
    return n;
  }

  private upsert(job: MaintenanceJob): Promise<unknown> {
    return this.queue!.upsertJobScheduler(job.schedulerId, { pattern: job.pattern, tz: 'UTC' }, { name: job.name, opts: MAINTENANCE_JOB_OPTIONS });
  }

  /** The worker's QueueReconciler; absent in a context without the outbox (the CLI). */
  private reconciler(): QueueReconciler | undefined {
    try {
      return this.moduleRef.get(QueueReconciler, { strict: false });
    } catch {
      return undefined;
    }
  }

  /** The next run of a schedule (for the ops check and tests). */
  async nextRun(schedulerId: string): Promise<number | undefined> {
    const s = await this.queue?.getJobScheduler(schedulerId);
    return s?.next ?? undefined;
  }

  async onApplicationShutdown(): Promise<void> {
    if (this.worker) await closeWorker(this.worker).catch(() => undefined);
    await this.queue?.close().catch(() => undefined);
  }
}

@Module({ providers: [MaintenanceScheduler], exports: [MaintenanceScheduler] })
export class MaintenanceModule {}
