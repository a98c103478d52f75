import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `signing_keys.active_from`: when a key starts signing. A rotated-in key is published in the JWKS
 * at once but signs only once the JWKS that relying parties (and CDNs) may have cached without it
 * has expired; the key it replaces signs until then (its `retired_at`, which can lie ahead).
 */
export class SigningKeyActiveFrom1765000000000 implements MigrationInterface {
  name = 'SigningKeyActiveFrom1765000000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE signing_keys ADD COLUMN active_from timestamptz NOT NULL DEFAULT now()`);
    await q.query(`UPDATE signing_keys SET active_from = created_at`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE signing_keys DROP COLUMN active_from`);
  }
}
