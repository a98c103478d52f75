import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `webhook_deliveries.sending_until`: the lease of the attempt in flight. A worker takes it (only
 * when no other lease is live) before it sends, and clears it when it records the outcome; it
 * runs out on its own WEBHOOK_TIMEOUT_MS plus a margin after it was taken, once the attempt can
 * no longer be running. Two jobs of one delivery (one re-added by the queue reconciler after a
 * Redis loss while the first was sending, or one BullMQ recovered as stalled from a worker that
 * is still sending) no longer send at the same time: the second waits for the lease and then
 * finds the outcome.
 */
export class WebhookDeliveryLease1764900000000 implements MigrationInterface {
  name = 'WebhookDeliveryLease1764900000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE webhook_deliveries ADD COLUMN sending_until timestamptz`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE webhook_deliveries DROP COLUMN sending_until`);
  }
}
