import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * One pending invitation per (tenant, address key): inviting an address again replaces the
 * pending invitation (new token, role, inviter and expiry; the earlier token stops working)
 * instead of adding another, so repeated invitations cannot pile up tokens for one address.
 * Expired, unaccepted invitations count as pending (a new invitation refreshes them). Before the
 * index, the newest pending invitation of each (tenant, address key) is kept and the others are
 * deleted (their tokens stop working, as a re-invitation's earlier token does now); the table is
 * locked against writers meanwhile so that no duplicate slips in between.
 */
export class DashboardInvitePending1765360000000 implements MigrationInterface {
  name = 'DashboardInvitePending1765360000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`LOCK TABLE dashboard_invites IN SHARE ROW EXCLUSIVE MODE`);
    await q.query(`
      DELETE FROM dashboard_invites d
       WHERE d.accepted_at IS NULL
         AND EXISTS (SELECT 1 FROM dashboard_invites n
                      WHERE n.tenant_id = d.tenant_id AND n.email_normalized = d.email_normalized AND n.accepted_at IS NULL
                        AND (n.created_at, n.id) > (d.created_at, d.id))`);
    await q.query(`CREATE UNIQUE INDEX dashboard_invites_pending_uq ON dashboard_invites (tenant_id, email_normalized) WHERE accepted_at IS NULL`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX dashboard_invites_pending_uq`);
  }
}
