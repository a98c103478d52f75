import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `user_sessions.authenticated_at`: when the user last authenticated in the session, the
 * `auth_time` claim (OIDC Core 2) of its access tokens. Null means the session's `created_at`
 * (every sign-in starts a session), so the column is added without rewriting the table; a guest
 * claim (registration into the guest's session) sets it.
 */
export class SessionAuthenticatedAt1765600000000 implements MigrationInterface {
  name = 'SessionAuthenticatedAt1765600000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE user_sessions ADD COLUMN authenticated_at timestamptz`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE user_sessions DROP COLUMN authenticated_at`);
  }
}
