import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * KEY_ENCRYPTION_KEY rotation: each recovery code records the fingerprint of the KEK its HMAC key
 * was derived from (EnvelopeCipher.keyId), so `npm run cli -- kek:rewrap` can tell how many users
 * still hold codes under an earlier key (an HMAC cannot be re-keyed without the code). Null: made
 * before this migration, under whichever KEK was current then.
 */
export class RecoveryCodeKeyId1766200000000 implements MigrationInterface {
  name = 'RecoveryCodeKeyId1766200000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE mfa_recovery_codes ADD COLUMN key_id text`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE mfa_recovery_codes DROP COLUMN key_id`);
  }
}
