import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `webhook_endpoints.enabled_at`: when the endpoint was last enabled (its creation, or the latest
 * `POST .../enable` ending an automatic disable). The fan-out sends an event only to endpoints
 * enabled at the event's time and not disabled since before it: an event that happened while an
 * endpoint was disabled is not sent to it even when an owner enables it again before the event's
 * fan-out runs (a worker backlog, a restart, a Redis outage). Existing endpoints start at their
 * creation time.
 */
export class WebhookEnabledAt1766300000000 implements MigrationInterface {
  name = 'WebhookEnabledAt1766300000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE webhook_endpoints ADD COLUMN enabled_at timestamptz NOT NULL DEFAULT now()`);
    await q.query(`UPDATE webhook_endpoints SET enabled_at = created_at`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE webhook_endpoints DROP COLUMN enabled_at`);
  }
}
