import { Inject, Injectable, Logger, OnApplicationShutdown, OnModuleInit } from '@nestjs/common';
import { Queue, Worker } from 'bullmq';
import Redis from 'ioredis';
import { APP_CONFIG, AppConfig } from '../../../config/config';
import { GuestPurgeService } from './guest-purge.service';

export const MAINTENANCE_QUEUE = 'maintenance';
/** Fixed scheduler id: however many workers run, BullMQ keeps one schedule and runs each job once. */
export const GUEST_PURGE_SCHEDULER_ID = 'guests-purge-daily';
export const GUEST_PURGE_PATTERN = '30 2 * * *'; // spec 8: daily 02:30 UTC

/** Worker-only: the daily purge as a BullMQ repeatable job (job scheduler) and its consumer. */
@Injectable()
export class GuestPurgeScheduler implements OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger(GuestPurgeScheduler.name);
  private queue?: Queue;
  private worker?: Worker;
  private connections: Redis[] = [];

  constructor(
    private readonly purge: GuestPurgeService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  private connection(): Redis {
    // BullMQ: its own connections, no ioredis keyPrefix (it uses `prefix`), no request retry limit
    const c = new Redis(this.config.REDIS_URL, { maxRetriesPerRequest: null });
    this.connections.push(c);
    return c;
  }

  async onModuleInit(): Promise<void> {
    const prefix = `${this.config.REDIS_KEY_PREFIX}bull`;
    this.queue = new Queue(MAINTENANCE_QUEUE, { connection: this.connection(), prefix });
    await this.queue.upsertJobScheduler(GUEST_PURGE_SCHEDULER_ID, { pattern: GUEST_PURGE_PATTERN, tz: 'UTC' }, { name: 'guests-purge', opts: { removeOnComplete: 100, removeOnFail: 100 } });
    this.worker = new Worker(
      MAINTENANCE_QUEUE,
      async (job) => {
        if (job.name === 'guests-purge') return this.purge.runOnce();
        return undefined;
      },
      { connection: this.connection(), prefix, concurrency: 1 },
    );
    this.worker.on('failed', (job, err) => this.logger.error(`maintenance job ${job?.name} failed: ${err.message}`));
  }

  /** The next scheduled run (for the ops check and tests). */
  async nextRun(): Promise<number | undefined> {
    const s = await this.queue?.getJobScheduler(GUEST_PURGE_SCHEDULER_ID);
    return s?.next ?? undefined;
  }

  async onApplicationShutdown(): Promise<void> {
    await this.worker?.close().catch(() => undefined);
    await this.queue?.close().catch(() => undefined);
    for (const c of this.connections) c.disconnect();
  }
}
