import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Whether an end user's password was set through a proof of mailbox control (a reset link). The
 * first passwordless sign-in into an unverified account clears a password that was not (see
 * PasswordlessSignIn.proveEmail); one the mailbox owner set by reset stays. Existing rows start
 * as not proven (their history is unknown).
 */
export class PasswordProven1764300000000 implements MigrationInterface {
  name = 'PasswordProven1764300000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE users ADD COLUMN password_proven boolean NOT NULL DEFAULT false`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE users DROP COLUMN password_proven`);
  }
}
