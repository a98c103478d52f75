import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The hourly sweep finds ended end-user sessions by `revoked_at`. A partial index holds only
 * revoked sessions (rare next to live ones) and never changes on the refresh hot path, which
 * updates `refreshed_at` only (those updates stay HOT). Sessions that ran out of refresh tokens
 * are found through their last token instead (BRIN on refresh_tokens.expires_at).
 */
export class SessionSweepIndex1764100000000 implements MigrationInterface {
  name = 'SessionSweepIndex1764100000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE INDEX user_sessions_revoked_idx ON user_sessions (revoked_at) WHERE revoked_at IS NOT NULL`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX user_sessions_revoked_idx`);
  }
}
