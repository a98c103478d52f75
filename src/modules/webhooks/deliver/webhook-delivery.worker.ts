import { BeforeApplicationShutdown, Inject, Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import { CommandBus } from '@nestjs/cqrs';
import { DelayedError, Job, UnrecoverableError, Worker } from 'bullmq';
import { APP_CONFIG, AppConfig } from '../../../config/config';
import { Db } from '../../../shared/db/db.service';
import { isDependencyUnavailable } from '../../../shared/errors/problem';
import { bullConnection, bullPrefix } from '../../../shared/outbox/bull-options';
import { outageLog } from '../../../shared/redis/outage-log';
import { retryDelayMs, retrySpanMs } from '../backoff';
import { WEBHOOK_DELIVERY_QUEUE } from '../webhook-events';
import { DeliverWebhookCommand, DeliverWebhookResult, WebhookAttemptFailed } from './deliver-webhook.command';
import { DeliveryJobData } from './delivery-job';
import { WebhookTenantSlots } from './tenant-slots';
import { closeWorker } from '../../../shared/outbox/close-worker';
import { countWebhookDelivery } from '../../../shared/http/worker-metrics';

/** How often a job may be recovered after its worker died mid-delivery before it is failed. */
const MAX_STALLED = 5;

/**
 * The consumer of `webhook-delivery`. Built by hand rather than with @Processor because its
 * options come from the configuration: the retry schedule (WEBHOOK_BACKOFF_BASE_MS, see
 * backoff.ts) and the job lock (WEBHOOK_LOCK_MS): a worker that dies mid-delivery leaves its
 * job locked until the lock expires, then another worker's stalled check runs it again
 * (at least once, same webhook-id). The delivery row counts the attempts and schedules the next
 * one (DeliverWebhookHandler); the job follows it. Closed before the database pool on shutdown,
 * waiting for the attempts in flight.
 */
@Injectable()
export class WebhookDeliveryWorker implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly log = new Logger('WebhookDelivery');
  worker?: Worker<DeliveryJobData, DeliverWebhookResult>;

  constructor(
    private readonly commandBus: CommandBus,
    private readonly db: Db,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly slots: WebhookTenantSlots,
  ) {}

  onApplicationBootstrap(): void {
    const c = this.config;
    if (c.isProduction && retrySpanMs(c.WEBHOOK_MAX_ATTEMPTS, c.WEBHOOK_BACKOFF_BASE_MS) < 24 * 3600 * 1000) {
      this.log.warn('WEBHOOK_MAX_ATTEMPTS and WEBHOOK_BACKOFF_BASE_MS retry webhooks for less than 24 hours');
    }
    this.worker = new Worker<DeliveryJobData, DeliverWebhookResult>(WEBHOOK_DELIVERY_QUEUE, (job, token) => this.process(job, token), {
      connection: bullConnection(c),
      prefix: bullPrefix(c),
      concurrency: c.WEBHOOK_CONCURRENCY,
      lockDuration: c.WEBHOOK_LOCK_MS,
      stalledInterval: c.WEBHOOK_LOCK_MS,
      maxStalledCount: MAX_STALLED,
      // a failed attempt: when the delivery row says its next one is due. Anything else that
      // failed the job (the database away) used no attempt of the row but one of the job's: it
      // looks again later (and waits there for the row's next attempt if that is not due yet);
      // a job whose attempts such failures used up ends the delivery as failed (onFailed)
      settings: {
        backoffStrategy: (attemptsMade, _type, err) =>
          err instanceof WebhookAttemptFailed && err.retryInMs !== null ? err.retryInMs : retryDelayMs(attemptsMade, c.WEBHOOK_BACKOFF_BASE_MS),
      },
    });
    this.worker.on('failed', (job, err) => void this.onFailed(job, err));
    this.worker.on('error', outageLog(this.log, 'webhook delivery worker'));
  }

  async beforeApplicationShutdown(): Promise<void> {
    if (this.worker) await closeWorker(this.worker).catch((err: Error) => this.log.warn(`closing the webhook delivery worker: ${err.message}`));
  }

  async process(job: Job<DeliveryJobData>, token?: string): Promise<DeliverWebhookResult> {
    const tenantId = job.data.tenantId ?? (await this.tenantOf(job.data.deliveryId));
    // one slot per run of the job: a stalled job run again elsewhere holds its own
    const jobId = `${job.id ?? job.data.deliveryId}:${token ?? ''}`;
    // the tenant has WEBHOOK_CONCURRENCY_PER_TENANT deliveries in flight: wait without using an attempt
    if (tenantId && !(await this.slots.acquire(tenantId, jobId))) {
      const waitMs = 2000 + Math.floor(Math.random() * 2000);
      await this.showNextAttempt(job.data.deliveryId, waitMs);
      await this.postpone(job, waitMs, token);
    }
    try {
      const result = await this.commandBus.execute(new DeliverWebhookCommand(job.data.deliveryId));
      countOutcome(result);
      // another job of the delivery holds its lease, or the delivery's next attempt is not due
      // yet: wait for it without using an attempt
      if ('retry_in_ms' in result) await this.postpone(job, result.retry_in_ms, token);
      return result;
    } catch (err) {
      if (err instanceof WebhookAttemptFailed) countWebhookDelivery(err.retryInMs === null ? 'failed' : 'retried');
      // the delivery's last attempt failed (the row counts them, not this job): no retry of the
      // job, whatever attempts it has left
      if (err instanceof WebhookAttemptFailed && err.retryInMs === null) throw new UnrecoverableError(`last attempt (${err.attempt}): ${err.message}`);
      // PostgreSQL (or Redis) away: the receiver did not fail, and the delivery row, which counts
      // the attempts, recorded none; the job waits and runs again without using one of its own
      // (else a short outage used them all, and a job given up while the row could not be marked
      // left the delivery pending for good). An attempt sent but not recorded is sent again with
      // the same webhook-id once its lease ends (at least once).
      if (!(err instanceof WebhookAttemptFailed) && isDependencyUnavailable(err)) {
        this.log.warn(`webhook delivery ${job.data.deliveryId}: a dependency is unavailable, trying again shortly: ${err instanceof Error ? err.message : String(err)}`);
        await this.postpone(job, 2000 + Math.floor(Math.random() * 2000), token);
      }
      throw err;
    } finally {
      if (tenantId) await this.slots.release(tenantId, jobId);
    }
  }

  private async postpone(job: Job<DeliveryJobData>, ms: number, token?: string): Promise<never> {
    await job.moveToDelayed(Date.now() + ms, token);
    throw new DelayedError();
  }

  /**
   * The delivery log's next_attempt_at follows a job waiting for a tenant slot. Not while another
   * job of the delivery holds its lease: that one records the outcome and the next attempt; and
   * never earlier than the row's own next attempt (a second job of the delivery, early for it).
   */
  private async showNextAttempt(deliveryId: string, inMs: number): Promise<void> {
    await this.db
      .query(
        `UPDATE webhook_deliveries SET next_attempt_at = GREATEST(next_attempt_at, now() + make_interval(secs => $2::double precision / 1000))
          WHERE id = $1 AND status = 'pending' AND (sending_until IS NULL OR sending_until <= now())`,
        [deliveryId, inMs],
      )
      .catch((e: Error) => this.log.warn(`webhook delivery ${deliveryId}: recording its next attempt: ${e.message}`));
  }

  /** The tenant of a delivery whose job predates DeliveryJobData.tenantId. */
  private async tenantOf(deliveryId: string): Promise<string | undefined> {
    const [row] = await this.db.query<{ tenant_id: string }>(`SELECT tenant_id FROM webhook_deliveries WHERE id = $1`, [deliveryId]);
    return row?.tenant_id;
  }

  /** Logs the attempt; a job BullMQ gave up on outside the handler (stalled too often) is marked failed. */
  private async onFailed(job: Job<DeliveryJobData> | undefined, err: Error): Promise<void> {
    if (!job) return;
    const final = err instanceof UnrecoverableError || job.attemptsMade >= (job.opts.attempts ?? 1) || /stalled/i.test(err.message);
    const attempt = err instanceof WebhookAttemptFailed ? ` attempt ${err.attempt}` : '';
    this.log.warn(`webhook delivery ${job.data.deliveryId}${attempt} failed${final ? ', giving up' : ''}: ${err.message}`);
    if (!final) return;
    await this.db
      .exec(
        `UPDATE webhook_deliveries SET status = 'failed', failed_at = now(), next_attempt_at = NULL, sending_until = NULL, last_error = COALESCE(last_error, 'gave up')
          WHERE id = $1 AND status = 'pending'`,
        [job.data.deliveryId],
      )
      // failed here, not by its last attempt (counted when it failed)
      .then((r) => r.rowCount && countWebhookDelivery('failed'))
      .catch((e: Error) => this.log.error(`marking webhook delivery ${job.data.deliveryId} failed: ${e.message}`));
  }
}

/**
 * authp_webhook_deliveries_total of a run that did not throw: delivered; dropped, its endpoint
 * disabled; or failed, its attempts used up (WEBHOOK_MAX_ATTEMPTS lowered since). A run that waits
 * (in flight elsewhere, not due) or found the delivery settled or deleted counts nothing.
 */
function countOutcome(result: DeliverWebhookResult): void {
  if ('delivered' in result) countWebhookDelivery('delivered');
  else if ('skipped' in result && result.skipped === 'endpoint_disabled') countWebhookDelivery('endpoint_disabled');
  else if ('skipped' in result && result.skipped === 'attempts_used') countWebhookDelivery('failed');
}
