import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A passwordless sign-in that resumes an authorization request (oauth_params) and then needs the
 * second factor keeps those parameters on its MFA challenge, so POST /v1/auth/mfa/verify can
 * answer them as the passwordless verification would have.
 */
export class MfaChallengeOauthParams1764200000000 implements MigrationInterface {
  name = 'MfaChallengeOauthParams1764200000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE mfa_challenges ADD COLUMN oauth_params jsonb`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE mfa_challenges DROP COLUMN oauth_params`);
  }
}
