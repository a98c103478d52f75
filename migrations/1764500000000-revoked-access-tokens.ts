import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Access tokens revoked by jti through POST /oauth/revoke (RFC 7009), kept until they expire.
 * Redis caches the answer per jti (`revoked:jti:<jti>`); PostgreSQL is the source of truth, so
 * a Redis that loses its data (flush, restart without persistence, eviction) never brings a
 * revoked token back. The hourly sweep deletes rows a day after their token expired.
 */
export class RevokedAccessTokens1764500000000 implements MigrationInterface {
  name = 'RevokedAccessTokens1764500000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE revoked_access_tokens (
        jti text PRIMARY KEY,
        tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
        expires_at timestamptz NOT NULL,
        revoked_at timestamptz NOT NULL DEFAULT now()
      )`);
    await q.query(`CREATE INDEX revoked_access_tokens_expires_idx ON revoked_access_tokens (expires_at)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE revoked_access_tokens`);
  }
}
