import { Inject } from '@nestjs/common';
import { CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import { APP_CONFIG, AppConfig } from '../../../config/config';
import { DashboardSessionService } from '../../../shared/auth/dashboard-session.service';
import { ClientHasher } from '../../../shared/crypto/client-hash';
import { PasswordHasher } from '../../../shared/crypto/password-hasher';
import { randomToken, sha256Hex } from '../../../shared/crypto/tokens';
import { Db, isUniqueViolation } from '../../../shared/db/db.service';
import { AppError, RateLimitedError } from '../../../shared/errors/app-error';
import { EventsService } from '../../../shared/events/events.service';
import { MailService } from '../../../shared/mail/mail.service';
import { LoginThrottleService } from '../../../shared/rate-limit/login-throttle.service';
import { RateLimitService } from '../../../shared/rate-limit/rate-limit.service';
import { mailboxSpelling, normalizeEmail } from '../../users/email';
import { UserEmailPolicy } from '../../users/user-email-policy.service';
import { DashboardAudit } from '../dashboard-audit.service';
import { DashboardMembershipsService } from '../dashboard-memberships.service';
import { AcceptInviteCommand, AcceptInviteResult, InviteMemberCommand } from './invite-member.command';
import { lockAccountWithPassword } from '../password-still';
import { passwordLength } from '../../../shared/http/lengths';

/**
 * An invitation mails the invited address a token; so that invitations cannot be used to mail
 * anyone without end (the subject names the tenant, whose name its owner chose):
 *
 * - one pending invitation per (tenant, address key): inviting again replaces it (new token, role,
 *   inviter and expiry; the earlier token stops working) instead of adding another;
 * - RATE_LIMIT_INVITES_PER_ADDRESS_PER_HOUR invitation mails per address key, all tenants together;
 * - RATE_LIMIT_INVITES_PER_TENANT_PER_DAY invitations per tenant.
 *
 * Both limits are counted (the one rate limiter, Redis) only for an invitation that is about to be
 * mailed: not for a refused address (422) or a member already (409; one who joined while this
 * invitation was being written is found only after the count, which then stays). The address limit is counted
 * first: a request it refuses uses up nothing of the tenant's allowance. Beyond either, 429
 * rate_limit/exceeded with Retry-After, and nothing is written or mailed.
 */
@CommandHandler(InviteMemberCommand)
export class InviteMemberHandler implements ICommandHandler<InviteMemberCommand, { invite_token: string }> {
  constructor(
    private readonly db: Db,
    private readonly events: EventsService,
    private readonly mail: MailService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly emailPolicy: UserEmailPolicy,
    private readonly limiter: RateLimitService,
    private readonly clientHasher: ClientHasher,
  ) {}

  async execute(cmd: InviteMemberCommand): Promise<{ invite_token: string }> {
    const tenant = cmd.actor.tenant!;
    const email = normalizeEmail(cmd.email);
    // issue 5 item 8: the tenant's address policy (422 email/*) applies to invites too
    await this.emailPolicy.assertAllowed(tenant.id, email);
    const token = randomToken();
    return this.db.tx(async (tx) => {
      const assertNotMember = async () => {
        const [member] = await tx.query(
          `SELECT 1 FROM tenant_members m JOIN dashboard_users u ON u.id = m.user_id WHERE m.tenant_id = $1 AND u.email_normalized = $2`,
          [tenant.id, email],
        );
        if (member) throw new AppError('member/exists');
      };
      await assertNotMember();
      await this.countMail(tenant.id, email);
      const [t] = await tx.query<{ name: string }>(`SELECT name FROM tenants WHERE id = $1`, [tenant.id]);
      // the pending invitation of this address, if any, is replaced in place (one winner under
      // concurrent invitations: the row lock of ON CONFLICT); xmax = 0 only on a fresh row. Its
      // created_at stays: it is the list's order, so a client paging through the invitations
      // meanwhile sees it once (its new expiry and the audit trail tell when it was sent again)
      const [inv] = await tx.query<{ id: string; created: boolean }>(
        `INSERT INTO dashboard_invites (tenant_id, email, email_normalized, role, token_hash, invited_by, expires_at)
         VALUES ($1, $2, $3, $4, $5, $6, now() + make_interval(secs => $7))
         ON CONFLICT (tenant_id, email_normalized) WHERE accepted_at IS NULL DO UPDATE
            SET email = EXCLUDED.email, role = EXCLUDED.role, token_hash = EXCLUDED.token_hash, invited_by = EXCLUDED.invited_by,
                expires_at = EXCLUDED.expires_at
         RETURNING id, xmax = 0 AS created`,
        [tenant.id, mailboxSpelling(cmd.email), email, cmd.role, sha256Hex(token), cmd.actor.userId, this.config.INVITE_TTL_SECONDS],
      );
      // again, now that the insert holds the invitation: an acceptance of the earlier invitation
      // that was in flight at the first check has committed by now (the insert waited for its row
      // lock, then found that row accepted and wrote a new one). Without this, the address (a
      // member now) kept a pending invitation that outlived a later removal and let them rejoin.
      await assertNotMember();
      await this.events.audit(tx, {
        tenantId: tenant.id, type: 'dashboard.member_invited', actorType: 'dashboard_user', actorId: cmd.actor.userId,
        targetType: 'invite', targetId: inv.id, metadata: { role: cmd.role, replaced_pending: !inv.created },
      });
      await this.mail.enqueue(tx, {
        tenantId: tenant.id,
        to: mailboxSpelling(cmd.email),
        template: 'dashboard_invite',
        data: { tenant_name: t.name, role: cmd.role, inviter_email: cmd.actor.email, expires_in_minutes: this.config.INVITE_TTL_SECONDS / 60 },
        secret: { token },
      });
      return { invite_token: token };
    });
  }

  /** One more invitation mail to `emailKey` from `tenantId`, or 429 (see the class comment). */
  private async countMail(tenantId: string, emailKey: string): Promise<void> {
    const c = this.config;
    const results = await this.limiter.hitInOrder([
      { bucket: 'invite-mail-address', key: `addr:${this.clientHasher.subject(`invite:${emailKey}`)}`, limit: c.RATE_LIMIT_INVITES_PER_ADDRESS_PER_HOUR, windowSeconds: 3600 },
      { bucket: 'invite-tenant', key: `tenant:${tenantId}`, limit: c.RATE_LIMIT_INVITES_PER_TENANT_PER_DAY, windowSeconds: 86400 },
    ]);
    const waits = results.filter((r) => !r.allowed).map((r) => r.retryAfterSeconds);
    if (waits.length) throw new RateLimitedError(results[0].allowed ? 'invite-tenant' : 'invite-mail-address', Math.max(...waits));
  }
}

@CommandHandler(AcceptInviteCommand)
export class AcceptInviteHandler implements ICommandHandler<AcceptInviteCommand, AcceptInviteResult> {
  constructor(
    private readonly db: Db,
    private readonly hasher: PasswordHasher,
    private readonly sessions: DashboardSessionService,
    private readonly events: EventsService,
    private readonly memberships: DashboardMembershipsService,
    private readonly throttle: LoginThrottleService,
    private readonly emailPolicy: UserEmailPolicy,
    private readonly audit: DashboardAudit,
  ) {}

  async execute(cmd: AcceptInviteCommand): Promise<AcceptInviteResult> {
    try {
      return await this.accept(cmd);
    } catch (e) {
      // two invitations of one new address accepted at once (from two tenants): the other created
      // the account first. Once more, as an existing account: the same password joins it.
      if (e instanceof AccountCreatedMeanwhile) return this.accept(cmd);
      throw e;
    }
  }

  private async accept(cmd: AcceptInviteCommand): Promise<AcceptInviteResult> {
    const [inv] = await this.db.query<{ id: string; tenant_id: string; email: string; email_normalized: string; role: string }>(
      `SELECT id, tenant_id, email, email_normalized, role FROM dashboard_invites
        WHERE token_hash = $1 AND accepted_at IS NULL AND expires_at > now()`,
      [sha256Hex(cmd.token)],
    );
    if (!inv) throw new AppError('invite/invalid');
    // the tenant's address policy of today: it may have changed since the invitation (422, the
    // invitation stays unused)
    await this.emailPolicy.assertAllowed(inv.tenant_id, inv.email);
    const [existing] = await this.db.query<{ id: string; email: string; password_hash: string }>(
      `SELECT id, email, password_hash FROM dashboard_users WHERE email_normalized = $1`,
      [inv.email_normalized],
    );
    let newHash: string | undefined;
    if (existing) {
      // a password check of the account like a sign-in's (whoever holds the token may guess); the
      // right password's attempt is taken back whatever the acceptance answers next (a member
      // already, a lost race), and the address is known to the failed-login throttle
      const ok = await this.throttle.judge('dashboard', inv.email_normalized, cmd.client.ip, () => this.hasher.verify(existing.password_hash, cmd.password));
      if (!ok) {
        await this.audit.signInFailed(inv.email_normalized, existing.id, 'invite_accept', cmd.client);
        throw new AppError('auth/invalid_credentials', 'Enter the password of your existing dashboard account');
      }
    } else {
      // counted as every new password is (PasswordLength): code points of the NFKC form that is hashed
      if (!passwordLength(cmd.password, 12, 128))
        throw new AppError('request/invalid', 'One or more fields are invalid', { errors: [{ field: 'password', message: 'password must be 12-128 characters for a new account' }] });
      newHash = await this.hasher.hash(cmd.password);
    }
    const accepted = await this.db.tx(async (tx) => {
      // single use: the conditional update has one winner. The token too: a re-invitation replaces
      // the token of the pending row, and the token read above must not be accepted after that
      const { rowCount } = await tx.exec(`UPDATE dashboard_invites SET accepted_at = now() WHERE id = $1 AND token_hash = $2 AND accepted_at IS NULL`, [
        inv.id,
        sha256Hex(cmd.token),
      ]);
      if (!rowCount) throw new AppError('invite/invalid');
      // who sent it must still be an owner (read under a share lock: a removal or demotion of the
      // inviter waits for this acceptance, or this acceptance sees it): an owner who was removed
      // or demoted cannot come back, nor bring anyone in, through an invitation sent before
      const inviter = await tx.query(
        `SELECT 1 FROM tenant_members m JOIN dashboard_invites i ON i.tenant_id = m.tenant_id AND i.invited_by = m.user_id
          WHERE i.id = $1 AND m.role = 'owner' FOR SHARE OF m`,
        [inv.id],
      );
      if (!inviter.length) throw new AppError('invite/invalid', 'The invitation was withdrawn: who sent it is no longer an owner of the tenant');
      // an existing account: the password judged above must still be its password (see lockAccountWithPassword)
      if (existing) await lockAccountWithPassword(tx, this.hasher, existing.id, existing.password_hash, cmd.password);
      let userId = existing?.id;
      if (!userId) {
        try {
          // no consent time: the accept request (contract: token and password) asks for none, and
          // a consent never given must not be recorded as given
          [{ id: userId }] = await tx.query<{ id: string }>(
            `INSERT INTO dashboard_users (email, email_normalized, password_hash) VALUES ($1, $2, $3) RETURNING id`,
            [inv.email, inv.email_normalized, newHash],
          );
        } catch (e) {
          if (isUniqueViolation(e)) throw new AccountCreatedMeanwhile();
          throw e;
        }
      }
      // already a member (another invitation for the same address was accepted first): 409, as
      // inviting a member is; this invitation stays unused (the transaction rolls back). An
      // invitation never changes the role of a member, so it can never demote an owner.
      const joined = await tx.query(
        `INSERT INTO tenant_members (tenant_id, user_id, role) VALUES ($1, $2, $3) ON CONFLICT (tenant_id, user_id) DO NOTHING RETURNING 1`,
        [inv.tenant_id, userId, inv.role],
      );
      if (!joined.length) throw new AppError('member/exists', 'This account is already a member of the tenant; the invitation was not used');
      // an existing account's password opened a session: a sign-in, audited as login's (a wrong one
      // was a failed sign-in, above)
      if (existing) await this.audit.signedIn(tx, userId, cmd.client, 'invite_accept');
      await this.events.audit(tx, { tenantId: inv.tenant_id, type: 'dashboard.member_joined', actorType: 'dashboard_user', actorId: userId, targetType: 'invite', targetId: inv.id, metadata: { role: inv.role } });
      const s = await this.sessions.create(tx, userId);
      // the account's own email, not the invitation's spelling of it
      return { body: { user: { id: userId, email: existing?.email ?? inv.email }, memberships: await this.memberships.of(tx, userId), csrf_token: s.csrfToken }, sessionToken: s.token };
    });
    // the account was created here with its password: this address is known to the throttle
    if (!existing) await this.throttle.trustAddress('dashboard', inv.email_normalized, cmd.client.ip);
    return accepted;
  }
}

/** The invited address got its account between the look-up and the insert (a parallel accept). */
class AccountCreatedMeanwhile extends Error {}
