import { OnWorkerEvent, Processor, WorkerHost } from '@nestjs/bullmq';
import { Logger } from '@nestjs/common';
import { CommandBus } from '@nestjs/cqrs';
import { Job } from 'bullmq';
import { Db } from '../../../shared/db/db.service';
import { OutboxJobData, settleOutboxRow } from '../../../shared/outbox/outbox-job';
import { outageLog } from '../../../shared/redis/outage-log';
import { isStallFailure, OUTBOX_MAX_STALLED_COUNT, requeueStalled } from '../../../shared/outbox/stalled-jobs';
import { WEBHOOK_TOPIC } from '../webhook-events';
import { FanOutWebhookEventCommand } from './fan-out-event.command';

/** Consumes the outbox topic `webhook` (relayed by OutboxRelay): one FanOutWebhookEvent per event. */
@Processor(WEBHOOK_TOPIC, { concurrency: 5, maxStalledCount: OUTBOX_MAX_STALLED_COUNT })
export class WebhookEventProcessor extends WorkerHost {
  private readonly log = new Logger(WebhookEventProcessor.name);

  constructor(
    private readonly commandBus: CommandBus,
    private readonly db: Db,
  ) {
    super();
  }

  process(job: Job<OutboxJobData>): Promise<{ deliveries: number }> {
    return this.commandBus.execute(new FanOutWebhookEventCommand(job.data));
  }

  @OnWorkerEvent('failed')
  onFailed(job: Job<OutboxJobData> | undefined, err: Error): void {
    if (!job) return;
    this.log.warn(`webhook fan-out of ${job.data.eventType} (outbox ${job.data.outboxId}) attempt ${job.attemptsMade} failed: ${err.message}`);
    // its workers died, the fan-out did not fail: queued again, the outbox row stays unsettled
    if (isStallFailure(err)) {
      void requeueStalled(job, this.log, `webhook fan-out of ${job.data.eventType} (outbox ${job.data.outboxId})`).then((again) => {
        if (!again && job.attemptsMade >= (job.opts.attempts ?? 1)) void this.settle(job);
      });
      return;
    }
    // given up for good: settled, so the queue reconciler does not queue it again
    if (job.attemptsMade >= (job.opts.attempts ?? 1)) void this.settle(job);
  }

  private settle(job: Job<OutboxJobData>): Promise<void> {
    return settleOutboxRow(this.db, job.data.outboxId).catch((e: Error) => this.log.warn(`settling outbox ${job.data.outboxId}: ${e.message}`));
  }

  private readonly outage = outageLog(this.log, 'webhook fan-out worker');

  @OnWorkerEvent('error')
  onError(err: Error): void {
    this.outage(err);
  }
}
