import { CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import { DashboardPrincipal } from '../../../shared/auth/auth-context';
import { Db } from '../../../shared/db/db.service';
import { AppError } from '../../../shared/errors/app-error';
import { EventsService } from '../../../shared/events/events.service';
import { LoginThrottleService } from '../../../shared/rate-limit/login-throttle.service';
import { DASHBOARD_MAIL_TEMPLATES, MailService } from '../../../shared/mail/mail.service';
import { normalizeEmail } from '../../users/email';
import { DashboardAudit } from '../dashboard-audit.service';
import { memberChanged, withdrawInvitations } from '../members/members.handlers';
import { MemberRole } from '../members/members.dto';
import { DeleteDashboardAccountCommand } from './delete-account.command';

/** One of the account's memberships, read under its tenant's lock, with the tenant's number of owners. */
interface HeldMembership {
  tenant_id: string;
  tenant_slug: string;
  role: MemberRole;
  owners: number;
}

/**
 * A dashboard user erases their own account (GDPR Art. 17: for dashboard accounts the platform is
 * the controller), after a recent sign-in or reauth, unless they are the last owner of a tenant
 * (409 member/last_owner naming those tenants: another member becomes owner first, as when leaving
 * one tenant). In one transaction the account leaves every tenant as RemoveMemberHandler lets a
 * member leave one (its pending invitations withdrawn, `dashboard.member_left` per tenant with
 * `reason: account_deleted`), its sessions and reset links go, and its `dashboard_users` row
 * (address, password hash, consents, last sign-in) is deleted, with the invitations it accepted and
 * the mails not yet sent to it (but invitations of other tenants, theirs): `created_by` of API keys, agents and
 * webhooks and `invited_by` of invitations become null (the foreign keys), the audit trail keeps
 * the id only. One `dashboard.account_deleted` row records it (ids and counts, never the address).
 * The address can then sign up or be invited again as a new account.
 *
 * Every dashboard session is a database row, read on every request (DashboardSessionService.find
 * joins the account): none is cached in Redis, so deleting the rows ends them on every API
 * process at once, and the old cookie is 401 at its next request.
 *
 * Locks, in this order (each the order of the flows it meets, so none of them can deadlock with it):
 * 1. the account's reset links: a password reset locks its link, then the account's row;
 * 2. the account's row (FOR UPDATE): sign-ins and invitation acceptances lock it before they write
 *    (lockAccountWithPassword), and a new membership or session needs it (its foreign key), so
 *    none can be added while the erasure runs; one that waited finds no account (401). A parallel
 *    erasure of the same account waits here and then finds it gone: 401, as the old cookie is;
 * 3. the rows of the account's tenants (FOR NO KEY UPDATE, in id order), as lockMember takes one:
 *    every change of a tenant's members' roles waits for the one before, so a removal of this
 *    member, a demotion or another owner leaving at the same moment either commits first (and the
 *    memberships and owner counts read after the locks see it) or waits for the erasure (and then
 *    sees the member gone). A tenant is never left without an owner;
 * 4. per tenant, as RemoveMemberHandler: the invitations the account sent (an acceptance locks its
 *    invitation, then the inviter's membership), then the membership.
 *
 * After the commit, the failed sign-in throttle forgets the address's state (known client
 * addresses, account counter), as an end user's erasure does.
 *
 * The calling session is checked again under the account's lock: one that a password reset or a
 * logout ended meanwhile erases nothing (401).
 *
 * Not serialized with it: a write of the account's own other session that names the account
 * (an API key, agent or webhook it creates, an invitation it sends) and a forgot-password request
 * for its address whose insert waits for the account's row while the erasure commits fail on
 * their foreign key: 503 with Retry-After (the problem filter's answer to a write racing a
 * delete), and the retry gets 401 (or a forgot-password's usual 202), a window of one transaction. A mail to the address being handed to
 * SMTP at that moment still leaves (the unsent ones are deleted; the mail worker sends only while
 * a mail's row is owed); a sign-in that proved the password at that moment records no known
 * address (LoginThrottleService.forgetAccounts' erased mark).
 */
@CommandHandler(DeleteDashboardAccountCommand)
export class DeleteDashboardAccountHandler implements ICommandHandler<DeleteDashboardAccountCommand, void> {
  constructor(
    private readonly db: Db,
    private readonly events: EventsService,
    private readonly audit: DashboardAudit,
    private readonly throttle: LoginThrottleService,
    private readonly mail: MailService,
  ) {}

  async execute({ session, client }: DeleteDashboardAccountCommand): Promise<void> {
    const userId = session.userId;
    const email = await this.db.tx(async (tx) => {
      await tx.query(`DELETE FROM dashboard_password_resets WHERE user_id = $1`, [userId]);
      const [account] = await tx.query<{ email_normalized: string }>(`SELECT email_normalized FROM dashboard_users WHERE id = $1 FOR UPDATE`, [userId]);
      const [live] = account ? await tx.query(`SELECT 1 FROM dashboard_sessions WHERE id = $1 AND user_id = $2 AND revoked_at IS NULL`, [session.sessionId, userId]) : [];
      if (!live) throw new AppError('auth/unauthorized', 'Sign in to the dashboard first');
      await tx.query(`SELECT 1 FROM tenants WHERE id IN (SELECT tenant_id FROM tenant_members WHERE user_id = $1) ORDER BY id FOR NO KEY UPDATE`, [userId]);
      // read after the locks: what the changes that committed while this waited left
      const held = await tx.query<HeldMembership>(
        `SELECT m.tenant_id, t.slug AS tenant_slug, m.role,
                (SELECT count(*)::int FROM tenant_members o WHERE o.tenant_id = m.tenant_id AND o.role = 'owner') AS owners
           FROM tenant_members m JOIN tenants t ON t.id = m.tenant_id WHERE m.user_id = $1 ORDER BY t.slug`,
        [userId],
      );
      const lastOwnerOf = held.filter((m) => m.role === 'owner' && m.owners <= 1).map((m) => m.tenant_slug);
      if (lastOwnerOf.length) {
        throw new AppError(
          'member/last_owner',
          `A tenant keeps at least one owner: make another member an owner of ${lastOwnerOf.join(', ')} first, then delete the account`,
          { extensions: { tenant_slugs: lastOwnerOf } },
        );
      }
      for (const m of held) {
        // the member leaving this tenant, as RemoveMemberHandler has them leave it
        const actor: DashboardPrincipal = { ...session, tenant: { id: m.tenant_id, slug: m.tenant_slug, role: m.role } };
        await withdrawInvitations(this.events, tx, actor, userId);
        await tx.query(`DELETE FROM tenant_members WHERE tenant_id = $1 AND user_id = $2`, [m.tenant_id, userId]);
        await memberChanged(this.events, tx, actor, userId, 'dashboard.member_left', { role: m.role, reason: 'account_deleted' });
      }
      const [{ live: sessionsEnded }] = await tx.query<{ live: number }>(
        `WITH d AS (DELETE FROM dashboard_sessions WHERE user_id = $1 RETURNING revoked_at) SELECT count(*) FILTER (WHERE revoked_at IS NULL)::int AS live FROM d`,
        [userId],
      );
      await tx.query(`DELETE FROM dashboard_users WHERE id = $1`, [userId]);
      // the address elsewhere: the invitations it accepted (kept a day after, for the sweeper) and
      // the dashboard's mails not yet sent to it (a reset link, an invitation or notice of a tenant
      // it left); not another tenant's: its pending invitations (accepting one makes a new account),
      // nor any tenant's end-user mails to the same address (another person's account there)
      await tx.query(`DELETE FROM dashboard_invites WHERE email_normalized = $1 AND accepted_at IS NOT NULL`, [account.email_normalized]);
      const mailsDropped = await this.mail.dropUnsent(tx, {
        tenantIds: held.map((m) => m.tenant_id),
        noTenant: true,
        templates: DASHBOARD_MAIL_TEMPLATES,
        emailNormalized: account.email_normalized,
        keyOf: normalizeEmail,
      });
      await this.audit.accountDeleted(tx, userId, session.sessionId, { tenants_left: held.length, sessions_ended: sessionsEnded, unsent_mails_dropped: mailsDropped }, client);
      return account.email_normalized;
    });
    // the failed sign-in throttle's state of the address (its known client addresses, its account
    // counter) would pass to a new account of it: forgotten, as an end user's erasure forgets it.
    // After the commit (the account is gone whatever Redis says): a Redis refusing it answers 503,
    // and what is left expires on its own (known addresses 30 days after their last sign-in)
    await this.throttle.forgetAccounts([{ realm: 'dashboard', account: email }]);
  }
}
