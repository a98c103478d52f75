import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `outbox.processed_at`: when the job of a relayed row settled (its consumer finished it, or gave
 * up for good). Redis holds the jobs between the relay and the consumer, so a Redis that loses
 * its data loses them; the queue reconciler (src/shared/outbox/queue-reconciler.ts) re-adds the
 * jobs of rows relayed but never settled, and of webhook deliveries still pending. Rows relayed
 * before this migration count as settled (their jobs ran under the old code).
 */
export class OutboxSettled1764400000000 implements MigrationInterface {
  name = 'OutboxSettled1764400000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE outbox ADD COLUMN processed_at timestamptz`);
    await q.query(`UPDATE outbox SET processed_at = dispatched_at WHERE dispatched_at IS NOT NULL`);
    await q.query(`CREATE INDEX outbox_unsettled_idx ON outbox (id) WHERE dispatched_at IS NOT NULL AND processed_at IS NULL`);
    await q.query(`CREATE INDEX webhook_deliveries_pending_idx ON webhook_deliveries (id) WHERE status = 'pending'`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX webhook_deliveries_pending_idx`);
    await q.query(`DROP INDEX outbox_unsettled_idx`);
    await q.query(`ALTER TABLE outbox DROP COLUMN processed_at`);
  }
}
