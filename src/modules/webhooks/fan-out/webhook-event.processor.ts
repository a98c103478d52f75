import { OnWorkerEvent, Processor, WorkerHost } from '@nestjs/bullmq';
import { Logger } from '@nestjs/common';
import { CommandBus } from '@nestjs/cqrs';
import { Job } from 'bullmq';
import { OutboxJobData } from '../../../shared/outbox/outbox-job';
import { WEBHOOK_TOPIC } from '../webhook-events';
import { FanOutWebhookEventCommand } from './fan-out-event.command';

/** Consumes the outbox topic `webhook` (relayed by OutboxRelay): one FanOutWebhookEvent per event. */
@Processor(WEBHOOK_TOPIC, { concurrency: 5 })
export class WebhookEventProcessor extends WorkerHost {
  private readonly log = new Logger(WebhookEventProcessor.name);

  constructor(private readonly commandBus: CommandBus) {
    super();
  }

  process(job: Job<OutboxJobData>): Promise<{ deliveries: number }> {
    return this.commandBus.execute(new FanOutWebhookEventCommand(job.data));
  }

  @OnWorkerEvent('failed')
  onFailed(job: Job<OutboxJobData> | undefined, err: Error): void {
    if (job) this.log.warn(`webhook fan-out of ${job.data.eventType} (outbox ${job.data.outboxId}) attempt ${job.attemptsMade} failed: ${err.message}`);
  }

  @OnWorkerEvent('error')
  onError(err: Error): void {
    this.log.error(`webhook fan-out worker: ${err.message}`);
  }
}
