import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Password reset links of dashboard accounts (tenant administrators): only the SHA-256 of the
 * token, one live link per account (a new request replaces it), single use.
 */
export class DashboardPasswordResets1765700000000 implements MigrationInterface {
  name = 'DashboardPasswordResets1765700000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE dashboard_password_resets (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        user_id uuid NOT NULL REFERENCES dashboard_users (id) ON DELETE CASCADE,
        token_hash text NOT NULL UNIQUE,
        expires_at timestamptz NOT NULL,
        used_at timestamptz,
        created_at timestamptz NOT NULL DEFAULT now()
      );
      -- one live link per account, also when requests race (a new one replaces it in place)
      CREATE UNIQUE INDEX dashboard_password_resets_live_uq ON dashboard_password_resets (user_id) WHERE used_at IS NULL;
      CREATE INDEX dashboard_password_resets_user_idx ON dashboard_password_resets (user_id);
    `);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE dashboard_password_resets`);
  }
}
