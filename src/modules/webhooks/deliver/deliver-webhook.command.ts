import { Command } from '@nestjs/cqrs';

export type DeliverWebhookResult =
  | { delivered: true; status_code: number }
  | { skipped: 'endpoint_deleted' | 'endpoint_disabled' | 'attempts_used' | 'already_delivered' | 'already_failed' }
  /**
   * try again in `retry_in_ms`, without using an attempt: another job holds the delivery's lease
   * (an attempt in flight), or the delivery's next attempt is not due yet
   */
  | { in_flight: true; retry_in_ms: number }
  | { not_due: true; retry_in_ms: number };

/**
 * One delivery attempt of a delivery row. The row decides (`attempts`, `next_attempt_at`, status),
 * not the BullMQ job running it: a second job of the delivery (re-added by the queue reconciler,
 * recovered as stalled) neither sends early nor gets attempts of its own. A failed attempt throws
 * WebhookAttemptFailed. An attempt sends only under the delivery's lease (`sending_until`), so two
 * jobs of one delivery never send at the same time.
 */
export class DeliverWebhookCommand extends Command<DeliverWebhookResult> {
  constructor(readonly deliveryId: string) {
    super();
  }
}

/**
 * A failed attempt: its message (log-safe) becomes the BullMQ failure reason. `attempt` is the
 * row's attempt number; `retryInMs` when the next one is due, null when that was the last one.
 */
export class WebhookAttemptFailed extends Error {
  constructor(
    message: string,
    readonly attempt: number,
    readonly retryInMs: number | null,
  ) {
    super(message);
  }
}
