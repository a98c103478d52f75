import { Command } from '@nestjs/cqrs';
import { OutboxJobData } from '../../../shared/outbox/outbox-job';

/** Fans one outbox event (topic `webhook`) out to every matching endpoint of its tenant. */
export class FanOutWebhookEventCommand extends Command<{ deliveries: number }> {
  constructor(readonly event: OutboxJobData) {
    super();
  }
}
