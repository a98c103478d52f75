import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The broadest default role guests of a tenant have been allowed to get (spec 5 rule 5): set by
 * an owner's `X-Service-Confirm: privileged-default-role`, or by a role in effect while guests
 * were enabled. Enabling guests later with a broader role needs the confirmation again. Existing
 * tenants start from what their guests get today (guests enabled: the current default role;
 * disabled: none, so re-enabling with a role broader than read_only asks for the confirmation).
 */
export class AnonymousConfirmedRole1764650000000 implements MigrationInterface {
  name = 'AnonymousConfirmedRole1764650000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      ALTER TABLE tenants ADD COLUMN anonymous_confirmed_role text
        CHECK (anonymous_confirmed_role IN ('read_only', 'member', 'admin'))`);
    await q.query(`UPDATE tenants SET anonymous_confirmed_role = default_user_role WHERE anonymous_signins_enabled`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE tenants DROP COLUMN anonymous_confirmed_role`);
  }
}
