import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Whether a tenant has any revoked access token that has not expired yet: the bearer guard asks
 * it when Redis holds no answer for the tenant (`revoked:jti-tenant:<id>`), so that a tenant
 * without such revocations needs no per-token read of revoked_access_tokens.
 */
export class RevokedAccessTokensTenant1764600000000 implements MigrationInterface {
  name = 'RevokedAccessTokensTenant1764600000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE INDEX revoked_access_tokens_tenant_idx ON revoked_access_tokens (tenant_id, expires_at)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX revoked_access_tokens_tenant_idx`);
  }
}
