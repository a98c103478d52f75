import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * AUDIT_RETENTION_DAYS and AGENT_ACTIVITY_RETENTION_DAYS: the hourly sweep deletes audit events
 * and agent actions by age. Both tables are append-only in created_at order, so a BRIN index (a
 * few pages) finds the old rows without reading the table, also when there are none to delete.
 *
 * Built CONCURRENTLY, outside a transaction (`transaction = false`): both tables take a row per
 * sign-in or exchange, and a plain CREATE INDEX would block those writes for the whole scan of a
 * large table. One statement per query (several in one query run as one transaction block). An
 * index a failed run left invalid is dropped first and built again. down() runs in the reverting
 * transaction (TypeORM's undo always opens one): a plain DROP INDEX of a BRIN index is brief.
 */
export class RetentionIndexes1766000000000 implements MigrationInterface {
  name = 'RetentionIndexes1766000000000';
  transaction = false;

  async up(q: QueryRunner): Promise<void> {
    for (const [index, table] of [
      ['audit_events_created_brin', 'audit_events'],
      ['agent_actions_created_brin', 'agent_actions'],
    ]) {
      await q.query(`DROP INDEX CONCURRENTLY IF EXISTS ${index}`);
      await q.query(`CREATE INDEX CONCURRENTLY ${index} ON ${table} USING brin (created_at)`);
    }
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX agent_actions_created_brin`);
    await q.query(`DROP INDEX audit_events_created_brin`);
  }
}
