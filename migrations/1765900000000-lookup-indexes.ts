import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Indexes found missing by reading every query's plan on large tables:
 * - the foreign keys to users of agent_user_revocations and email_otp_codes had no index led by
 *   user_id, so deleting users (the guest purge: up to 1000 per tenant per run) scanned both
 *   tables once per deleted user, the cost growing with other users' rows (12 s per batch at
 *   50k revocations);
 * - the agent activity timeline filtered by action_type, and the webhook delivery log filtered by
 *   status, walked the agent's (endpoint's) whole history, or the whole table, to fill a page;
 * - the hourly sweep of tenant_mau_users by month scanned the table (month is the second column
 *   of its primary key).
 */
export class LookupIndexes1765900000000 implements MigrationInterface {
  name = 'LookupIndexes1765900000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE INDEX agent_user_revocations_user_idx ON agent_user_revocations (user_id);
      CREATE INDEX email_otp_codes_user_idx ON email_otp_codes (user_id) WHERE user_id IS NOT NULL;
      CREATE INDEX agent_actions_agent_action_idx ON agent_actions (agent_client_id, action, created_at DESC, id DESC);
      CREATE INDEX webhook_deliveries_endpoint_status_idx ON webhook_deliveries (endpoint_id, status, created_at DESC, id DESC);
      CREATE INDEX tenant_mau_users_month_idx ON tenant_mau_users (month);
    `);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`
      DROP INDEX tenant_mau_users_month_idx;
      DROP INDEX webhook_deliveries_endpoint_status_idx;
      DROP INDEX agent_actions_agent_action_idx;
      DROP INDEX email_otp_codes_user_idx;
      DROP INDEX agent_user_revocations_user_idx;
    `);
  }
}
