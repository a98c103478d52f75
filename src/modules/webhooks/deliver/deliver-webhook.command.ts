import { Command } from '@nestjs/cqrs';

export type DeliverWebhookResult =
  | { delivered: true; status_code: number }
  | { skipped: 'endpoint_deleted' | 'endpoint_disabled' | 'already_delivered' | 'already_failed' }
  /** another job holds the delivery's lease (an attempt in flight): try again in `retry_in_ms`, without using an attempt */
  | { in_flight: true; retry_in_ms: number };

/**
 * One delivery attempt of a delivery row. `attempt` counts from 1; `final` says it is the last
 * one BullMQ will make. A failed attempt throws (BullMQ retries it with the webhook backoff). An
 * attempt sends only under the delivery's lease (`sending_until`), so two jobs of one delivery
 * never send at the same time.
 */
export class DeliverWebhookCommand extends Command<DeliverWebhookResult> {
  constructor(
    readonly deliveryId: string,
    readonly attempt: number,
    readonly final: boolean,
  ) {
    super();
  }
}

/** A failed attempt: its message (log-safe) becomes the BullMQ failure reason. */
export class WebhookAttemptFailed extends Error {}
