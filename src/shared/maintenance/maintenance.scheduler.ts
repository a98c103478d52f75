import { Inject, Injectable, Logger, Module, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { Queue, Worker } from 'bullmq';
import { APP_CONFIG, AppConfig } from '../../config/config';
import { bullConnection, bullPrefix } from '../outbox/bull-options';
import { QueueReconciler } from '../outbox/queue-reconciler';
import { outageLog } from '../redis/outage-log';

export const MAINTENANCE_QUEUE = 'maintenance';

/** A recurring job of the worker: a fixed scheduler id, so however many workers run, BullMQ keeps one schedule and runs each occurrence once. */
export interface MaintenanceJob {
  name: string;
  schedulerId: string;
  /** cron pattern, UTC */
  pattern: string;
  run: () => Promise<unknown>;
}

/**
 * Worker-only: the `maintenance` queue, its job schedulers and its one consumer. Modules
 * register their jobs in `onModuleInit`; the schedules are upserted once every module has.
 */
@Injectable()
export class MaintenanceScheduler implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger(MaintenanceScheduler.name);
  private readonly jobs = new Map<string, MaintenanceJob>();
  private queue?: Queue;
  private worker?: Worker;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly moduleRef: ModuleRef,
  ) {}

  register(job: MaintenanceJob): void {
    this.jobs.set(job.name, job);
  }

  async onApplicationBootstrap(): Promise<void> {
    if (!this.jobs.size) return;
    const prefix = bullPrefix(this.config);
    this.queue = new Queue(MAINTENANCE_QUEUE, { connection: bullConnection(this.config), prefix });
    this.queue.on('error', outageLog(this.logger, 'maintenance queue'));
    for (const job of this.jobs.values()) await this.upsert(job);
    // the worker's queue reconciler re-creates a schedule Redis lost (a restart without
    // persistence, a flush), instead of waiting for the next worker start
    this.reconciler()?.register({ name: 'schedules', run: () => this.ensureSchedules() });
    this.worker = new Worker(
      MAINTENANCE_QUEUE,
      async (job) => {
        const known = this.jobs.get(job.name);
        // a job this worker does not know (an older or newer release) fails visibly and is retried elsewhere
        if (!known) throw new Error(`unknown maintenance job ${job.name}`);
        return known.run();
      },
      { connection: bullConnection(this.config), prefix, concurrency: 1 },
    );
    this.worker.on('failed', (job, err) => this.logger.error(`maintenance job ${job?.name} failed: ${err.message}`));
    this.worker.on('error', outageLog(this.logger, 'maintenance worker'));
  }

  /** Re-creates the schedules Redis no longer holds; returns how many it re-created. */
  async ensureSchedules(): Promise<number> {
    let n = 0;
    for (const job of this.jobs.values()) {
      if (!this.queue || (await this.queue.getJobScheduler(job.schedulerId))) continue;
      await this.upsert(job);
      this.logger.warn(`job schedule ${job.schedulerId} was missing from Redis: re-created`);
      n++;
    }
    return n;
  }

  private upsert(job: MaintenanceJob): Promise<unknown> {
    return this.queue!.upsertJobScheduler(job.schedulerId, { pattern: job.pattern, tz: 'UTC' }, { name: job.name, opts: { removeOnComplete: 100, removeOnFail: 100 } });
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
    await this.worker?.close().catch(() => undefined);
    await this.queue?.close().catch(() => undefined);
  }
}

@Module({ providers: [MaintenanceScheduler], exports: [MaintenanceScheduler] })
export class MaintenanceModule {}
