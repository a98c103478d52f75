import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `user_mfa_factors.setup_by`: who started a pending TOTP enrollment (`sid:<session>`, or
 * `jti:<token>` for an enrollment-only token of a sign-in, which has no session). Only that caller
 * completes it (verify-setup), so another session of the user (a stale or stolen one, too old to
 * start enrollment) cannot spend the user's MFA failure allowance on it and keep the owner from
 * enabling TOTP. Factors pending or enabled before this column have none: any caller, as before.
 */
export class MfaSetupBy1766400000000 implements MigrationInterface {
  name = 'MfaSetupBy1766400000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE user_mfa_factors ADD COLUMN setup_by text`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE user_mfa_factors DROP COLUMN setup_by`);
  }
}
