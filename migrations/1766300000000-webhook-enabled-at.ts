import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `webhook_endpoints.last_disabled_at` and `enabled_at`: the endpoint's last disabled period, from
 * an automatic disable to the `POST .../enable` that ended it (`enabled_at` is the creation time
 * until then). The fan-out sends an event only to endpoints that were enabled at the event's time:
 * an event of that period is not sent even when an owner enabled the endpoint again before the
 * event's fan-out ran (a worker backlog, a restart, a Redis outage), and one from before the
 * disable still is. Existing endpoints have no disabled period on record.
 */
export class WebhookEnabledAt1766300000000 implements MigrationInterface {
  name = 'WebhookEnabledAt1766300000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE webhook_endpoints ADD COLUMN enabled_at timestamptz NOT NULL DEFAULT now(), ADD COLUMN last_disabled_at timestamptz`);
    await q.query(`UPDATE webhook_endpoints SET enabled_at = created_at`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE webhook_endpoints DROP COLUMN enabled_at, DROP COLUMN last_disabled_at`);
  }
}
