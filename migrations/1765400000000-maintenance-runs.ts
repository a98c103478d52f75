import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `maintenance_runs`: when each worker maintenance job (src/shared/maintenance) last completed, so
 * a worker that starts after a scheduled run fell due while none was up runs it at once (the
 * daily guest purge) instead of waiting a day. BRIN indexes on `outbox.created_at` and
 * `webhook_deliveries.created_at` (both grow in insertion order) let the hourly sweep find the
 * settled rows past their retention without a full scan and without slowing writes.
 */
export class MaintenanceRuns1765400000000 implements MigrationInterface {
  name = 'MaintenanceRuns1765400000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE maintenance_runs (
        job text PRIMARY KEY,
        last_completed_at timestamptz NOT NULL
      );
      CREATE INDEX outbox_created_brin ON outbox USING brin (created_at);
      CREATE INDEX webhook_deliveries_created_brin ON webhook_deliveries USING brin (created_at);
    `);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX webhook_deliveries_created_brin; DROP INDEX outbox_created_brin; DROP TABLE maintenance_runs`);
  }
}
