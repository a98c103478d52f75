import { Command } from '@nestjs/cqrs';

export type DeliverWebhookResult =
  | { delivered: true; status_code: number }
  | { skipped: 'endpoint_deleted' | 'endpoint_disabled' | 'already_delivered' | 'already_failed' };

/**
 * One delivery attempt of a delivery row. `attempt` counts from 1; `final` says it is the last
 * one BullMQ will make. A failed attempt throws (BullMQ retries it with the webhook backoff).
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
