import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * AUDIT_RETENTION_DAYS and AGENT_ACTIVITY_RETENTION_DAYS: the hourly sweep deletes audit events
 * and agent actions by age. Both tables are append-only in created_at order, so a BRIN index (a
 * few pages) finds the old rows without reading the table, also when there are none to delete.
 */
export class RetentionIndexes1766000000000 implements MigrationInterface {
  name = 'RetentionIndexes1766000000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE INDEX audit_events_created_brin ON audit_events USING brin (created_at);
      CREATE INDEX agent_actions_created_brin ON agent_actions USING brin (created_at);
    `);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`
      DROP INDEX agent_actions_created_brin;
      DROP INDEX audit_events_created_brin;
    `);
  }
}
