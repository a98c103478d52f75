import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The hourly sweep finds expired refresh tokens by `expires_at`. Rows are appended roughly in
 * expiry order (a fixed lifetime from creation), so a BRIN index (a few pages, next to nothing
 * to maintain on the refresh hot path) lets the sweep skip the live part of the table instead
 * of scanning it whole.
 */
export class SweepIndexes1764000000000 implements MigrationInterface {
  name = 'SweepIndexes1764000000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE INDEX refresh_tokens_expires_brin ON refresh_tokens USING brin (expires_at)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX refresh_tokens_expires_brin`);
  }
}
