import { OnWorkerEvent, Processor, WorkerHost } from '@nestjs/bullmq';
import { Logger } from '@nestjs/common';
import { CommandBus } from '@nestjs/cqrs';
import { Job } from 'bullmq';
import { Db } from '../../../shared/db/db.service';
import { OutboxJobData, settleOutboxRow } from '../../../shared/outbox/outbox-job';
import { outageLog } from '../../../shared/redis/outage-log';
import { OUTBOX_MAX_STALLED_COUNT, outboxJobFailed } from '../../../shared/outbox/stalled-jobs';
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

  /** Given up for good (out of attempts, or killing its workers): settled, so the queue reconciler does not queue it again. */
  @OnWorkerEvent('failed')
  onFailed(job: Job<OutboxJobData> | undefined, err: Error): void {
    if (job && outboxJobFailed(job, err, this.log, `webhook fan-out of ${job.data.eventType}`)) void this.settle(job);
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
