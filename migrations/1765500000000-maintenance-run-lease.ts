import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The guest purge's one-run-at-a-time lock becomes a lease row in `maintenance_runs`
 * (`running_until`, `holder`) instead of a session-level advisory lock: a row works through any
 * pooler (a transaction-mode PgBouncer may run a lock and its unlock on different server
 * connections, leaving the lock held), and a holder that dies leaves a lease that expires by
 * itself. `last_completed_at` becomes nullable: a job's row may exist (leased) before its first
 * run completes.
 */
export class MaintenanceRunLease1765500000000 implements MigrationInterface {
  name = 'MaintenanceRunLease1765500000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      ALTER TABLE maintenance_runs
        ADD COLUMN running_until timestamptz,
        ADD COLUMN holder text,
        ALTER COLUMN last_completed_at DROP NOT NULL
    `);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`
      DELETE FROM maintenance_runs WHERE last_completed_at IS NULL;
      ALTER TABLE maintenance_runs ALTER COLUMN last_completed_at SET NOT NULL, DROP COLUMN holder, DROP COLUMN running_until
    `);
  }
}
