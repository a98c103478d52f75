import { MigrationInterface, QueryRunner } from 'typeorm';

/** Guests (spec 3.1): exact monthly active users per tenant, and the purge's index. */
export class Guests1763760000000 implements MigrationInterface {
  name = 'Guests1763760000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      ALTER TABLE users ADD COLUMN mau_month date;
      -- one row per (tenant, calendar month): the exact count of distinct active users
      CREATE TABLE tenant_mau (
        tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
        month date NOT NULL,
        active_users integer NOT NULL DEFAULT 0,
        PRIMARY KEY (tenant_id, month)
      );
      -- which users were counted in a month (keeps the count exact under races)
      CREATE TABLE tenant_mau_users (
        tenant_id uuid NOT NULL,
        month date NOT NULL,
        user_id uuid NOT NULL,
        PRIMARY KEY (tenant_id, month, user_id)
      );
      CREATE INDEX users_guest_activity_idx ON users (tenant_id, last_active_at) WHERE is_anonymous;
    `);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX users_guest_activity_idx; DROP TABLE tenant_mau_users, tenant_mau; ALTER TABLE users DROP COLUMN mau_month`);
  }
}
