import { Inject, Injectable, Logger, OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import { Queue } from 'bullmq';
import Redis from 'ioredis';
import { APP_CONFIG, AppConfig } from '../../config/config';
import { Db } from '../db/db.service';
import { bullConnection, bullPrefix } from './bull-options';
import { FairShare } from './fair-share';
import { outageLog } from '../redis/outage-log';
import { jobOptionsFor, OutboxJobData, outboxJobId, ROW_READ_TOPICS } from './outbox-job';
import { quitRedis } from '../redis/redis.module';

/** Rows per relay transaction; a full batch is followed at once by the next one. */
export const OUTBOX_BATCH_SIZE = 100;

/**
 * How far back the reconciler looks for unsettled rows: less than the day BullMQ keeps a
 * completed job (DEFAULT_OUTBOX_JOB_OPTIONS), so a row whose job ran but whose settlement write
 * failed finds its completed job still there and is not run twice.
 */
export const UNSETTLED_WINDOW_HOURS = 20;

interface OutboxRow {
  id: string;
  tenant_id: string | null;
  topic: string;
  event_type: string;
  payload: Record<string, unknown>;
  secret_enc: string | null;
  created_at: Date;
}

/**
 * Moves committed outbox rows to BullMQ, one queue per topic (`email`, `webhook`, ...; a topic
 * nobody consumes yet is queued all the same). Each batch is one transaction: lock pending rows
 * (SKIP LOCKED, so several workers relay side by side without taking the same row), add them
 * with job id outboxJobId(id, created_at), mark them dispatched, commit. A crash between the add and the
 * commit re-adds the same ids later, which BullMQ ignores: a row is queued once.
 */
@Injectable()
export class OutboxRelay implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly log = new Logger(OutboxRelay.name);
  /** a store away: one warning a minute, not one per poll */
  private readonly failing = outageLog(this.log, 'outbox relay failed, retrying every poll');
  private readonly queues = new Map<string, Queue>();
  private connection?: Redis;
  private timer?: NodeJS.Timeout;
  private inFlight?: Promise<void>;
  private stopped = true;
  /** rows this relay dispatched since it started (metrics, tests) */
  dispatched = 0;
  /** when the last poll finished, successful or not (the worker's liveness: WorkerHealthServer) */
  private lastPollAt = Date.now();

  constructor(
    private readonly db: Db,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly fairShare: FairShare,
  ) {}

  onApplicationBootstrap(): void {
    this.start();
  }

  async onModuleDestroy(): Promise<void> {
    await this.stop();
    await Promise.all([...this.queues.values()].map((q) => q.close().catch(() => undefined)));
    this.queues.clear();
    if (this.connection) await quitRedis(this.connection);
    this.connection = undefined;
  }

  /** Starts polling every OUTBOX_POLL_MS. */
  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.lastPollAt = Date.now();
    this.schedule(0);
  }

  /** Stops polling and waits for the batch in progress to commit or roll back. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    await this.inFlight;
  }

  /** Milliseconds since the last poll finished (0 while stopped: nothing is owed). */
  lastPollAgeMs(): number {
    return this.stopped ? 0 : Date.now() - this.lastPollAt;
  }

  /** Relays one batch in one transaction; returns how many rows it dispatched. */
  async relayOnce(): Promise<number> {
    const n = await this.db.tx(async (tx) => {
      const rows = await tx.query<OutboxRow>(
        `SELECT id, tenant_id, topic, event_type, payload, secret_enc, created_at FROM outbox
          WHERE dispatched_at IS NULL ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED`,
        [OUTBOX_BATCH_SIZE],
      );
      if (!rows.length) return 0;
      await this.addJobs(rows);
      await tx.query(`UPDATE outbox SET dispatched_at = now() WHERE id = ANY($1::bigint[])`, [rows.map((r) => r.id)]);
      return rows.length;
    });
    this.dispatched += n;
    return n;
  }

  /**
   * The queue reconciler's step: re-adds the jobs of rows relayed at least `graceSeconds` ago and
   * never settled (`processed_at`, set by the consumer when it finished or gave up). A job Redis
   * still holds is left as it is (same job id); one Redis lost runs again. Only rows relayed
   * within UNSETTLED_WINDOW: older settled jobs are no longer in Redis to make the re-add a no-op.
   */
  async redispatchUnsettled(graceSeconds: number): Promise<number> {
    let after = '0';
    let total = 0;
    for (;;) {
      const rows = await this.db.query<OutboxRow>(
        `SELECT id, tenant_id, topic, event_type, payload, secret_enc, created_at FROM outbox
          WHERE dispatched_at IS NOT NULL AND processed_at IS NULL AND id > $1
            AND dispatched_at <= now() - make_interval(secs => $2) AND dispatched_at > now() - make_interval(hours => $3)
          ORDER BY id LIMIT $4`,
        [after, graceSeconds, UNSETTLED_WINDOW_HOURS, OUTBOX_BATCH_SIZE],
      );
      if (!rows.length) return total;
      await this.addJobs(rows);
      total += rows.length;
      after = String(rows[rows.length - 1].id);
    }
  }

  /**
   * Adds the rows' jobs, one FairShare.addBulk per topic, under their fixed job ids: those Redis
   * already holds are left as they are (a batch relayed again, the reconciler's re-adds).
   */
  private async addJobs(rows: OutboxRow[]): Promise<void> {
    const byTopic = new Map<string, OutboxRow[]>();
    for (const r of rows) byTopic.set(r.topic, [...(byTopic.get(r.topic) ?? []), r]);
    for (const [topic, batch] of byTopic) {
      const opts = jobOptionsFor(topic);
      await this.fairShare.addBulk(
        this.queue(topic),
        batch.map((r) => ({ tenantId: r.tenant_id, name: r.event_type, data: toJobData(r), opts: { ...opts, jobId: outboxJobId(r.id, r.created_at) } })),
      );
    }
  }


  private schedule(ms: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.inFlight = this.tick();
    }, ms);
  }

  private async tick(): Promise<void> {
    let next = this.config.OUTBOX_POLL_MS;
    try {
      if ((await this.relayOnce()) === OUTBOX_BATCH_SIZE) next = 0;
    } catch (err) {
      this.failing(err instanceof Error ? err : new Error(String(err)));
    }
    this.inFlight = undefined;
    this.lastPollAt = Date.now();
    this.schedule(next);
  }

  /** The producer side of a topic's queue; every queue shares one connection. */
  private queue(topic: string): Queue {
    let q = this.queues.get(topic);
    if (!q) {
      // a producer fails fast instead of queueing commands while Redis is away: the batch rolls
      // back and the next poll tries again
      if (!this.connection) {
        this.connection = new Redis({ ...bullConnection(this.config), maxRetriesPerRequest: 1 });
        this.connection.on('error', outageLog(this.log, 'outbox relay Redis connection'));
      }
      q = new Queue(topic, { connection: this.connection, prefix: bullPrefix(this.config) });
      q.on('error', outageLog(this.log, `queue ${topic}`));
      this.queues.set(topic, q);
    }
    return q;
  }
}

/** A row's job data: its ids, and its payload and encrypted secret unless its topic reads them from the row (ROW_READ_TOPICS). */
function toJobData(r: OutboxRow): OutboxJobData {
  const ids = { outboxId: String(r.id), tenantId: r.tenant_id, eventType: r.event_type, createdAt: r.created_at.toISOString() };
  return ROW_READ_TOPICS.has(r.topic) ? ids : { ...ids, payload: r.payload, secretEnc: r.secret_enc };
}
