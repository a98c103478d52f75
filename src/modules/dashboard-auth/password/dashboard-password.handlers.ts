import { Command, CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import { ClientInfoValue } from '../../../shared/auth/auth-context';
import { PasswordHasher } from '../../../shared/crypto/password-hasher';
import { randomToken, sha256Hex } from '../../../shared/crypto/tokens';
import { Db } from '../../../shared/db/db.service';
import { AppError } from '../../../shared/errors/app-error';
import { EventsService } from '../../../shared/events/events.service';
import { RequestTrail } from '../../../shared/events/request-trail';
import { MailService } from '../../../shared/mail/mail.service';
import { LoginThrottleService } from '../../../shared/rate-limit/login-throttle.service';
import { MailLimits } from '../../../shared/rate-limit/mail-limits.service';
import { ACCEPTED, AcceptedResponse } from '../../account-security/account-security.constants';
import { normalizeEmail } from '../../users/email';
import { withdrawPendingInvitations } from '../members/members.handlers';

/** A dashboard password reset link lives 30 minutes, as an end user's. */
export const DASHBOARD_RESET_TTL_SECONDS = 30 * 60;
/** Where MailLimits counts a dashboard account's mails (end users' are counted per tenant). */
const DASHBOARD_MAIL_SCOPE = 'dashboard';

export class DashboardForgotPasswordCommand extends Command<AcceptedResponse> {
  constructor(readonly email: string, readonly client: ClientInfoValue) {
    super();
  }
}

/**
 * OWASP Forgot Password for dashboard accounts: the same 202 body for every address, after the
 * same statement (it writes a link only for an existing account) and a comparable amount of other
 * work; limited per client address and per recipient before anything is looked up (the
 * RATE_LIMIT_EMAIL_* values of the end-user flows). The link (256 random bits, stored as SHA-256)
 * lives 30 minutes and replaces the account's earlier ones.
 */
@CommandHandler(DashboardForgotPasswordCommand)
export class DashboardForgotPasswordHandler implements ICommandHandler<DashboardForgotPasswordCommand, AcceptedResponse> {
  constructor(
    private readonly db: Db,
    private readonly limits: MailLimits,
    private readonly mail: MailService,
    private readonly events: EventsService,
    private readonly trail: RequestTrail,
  ) {}

  async execute(cmd: DashboardForgotPasswordCommand): Promise<AcceptedResponse> {
    const email = normalizeEmail(cmd.email);
    // the mail limits of every flow: per client address (all flows together) and per recipient (this flow; a dashboard account has no tenant)
    await this.limits.enforce('dashboard-forgot', DASHBOARD_MAIL_SCOPE, email, cmd.client.ip);
    const token = randomToken();
    await this.db.tx(async (tx) => {
      const [user] = await tx.query<{ id: string; email: string }>(
        `WITH u AS (SELECT id, email FROM dashboard_users WHERE email_normalized = $1),
              used AS (DELETE FROM dashboard_password_resets WHERE user_id IN (SELECT id FROM u) AND used_at IS NOT NULL),
              ins AS (INSERT INTO dashboard_password_resets (user_id, token_hash, expires_at)
                      SELECT id, $2, now() + make_interval(secs => $3) FROM u
                      ON CONFLICT (user_id) WHERE used_at IS NULL
                      DO UPDATE SET token_hash = EXCLUDED.token_hash, expires_at = EXCLUDED.expires_at, created_at = now())
         SELECT id, email FROM u`,
        [email, sha256Hex(token), DASHBOARD_RESET_TTL_SECONDS],
      );
      // an unknown address: the trail of the end-user flows (the work a mail costs, keyed hash prefixes)
      if (!user) return this.trail.nothingSent(tx, null, 'dashboard.password_reset_requested', email, cmd.client.ip);
      await this.mail.enqueue(tx, { tenantId: null, to: user.email, template: 'dashboard_password_reset', data: { expires_in_minutes: DASHBOARD_RESET_TTL_SECONDS / 60 }, secret: { token } });
      await this.events.audit(tx, {
        tenantId: null,
        type: 'dashboard.password_reset_requested',
        actorType: 'anonymous',
        targetType: 'dashboard_user',
        targetId: user.id,
        metadata: { mail_sent: true },
      });
    });
    return ACCEPTED;
  }
}

export class DashboardResetPasswordCommand extends Command<void> {
  constructor(readonly token: string, readonly password: string, readonly client: ClientInfoValue) {
    super();
  }
}

/**
 * Sets a dashboard account's password with an emailed link: single use (of parallel uses one
 * wins), the account's other links go, every dashboard session of the account ends (whoever knew
 * the old password is signed out), the account is told by email, audited. The address the reset
 * came from is known to the failed sign-in throttle afterwards, as after an end user's reset.
 */
@CommandHandler(DashboardResetPasswordCommand)
export class DashboardResetPasswordHandler implements ICommandHandler<DashboardResetPasswordCommand, void> {
  constructor(
    private readonly db: Db,
    private readonly passwords: PasswordHasher,
    private readonly mail: MailService,
    private readonly events: EventsService,
    private readonly throttle: LoginThrottleService,
  ) {}

  async execute(cmd: DashboardResetPasswordCommand): Promise<void> {
    // a dead link costs no password hash (an argon2 run for any made-up token would let anyone load the hashing pool)
    const [live] = await this.db.query(`SELECT 1 FROM dashboard_password_resets WHERE token_hash = $1 AND used_at IS NULL AND expires_at > now()`, [sha256Hex(cmd.token)]);
    if (!live) throw new AppError('token/invalid');
    const passwordHash = await this.passwords.hash(cmd.password);
    const user = await this.db.tx(async (tx) => {
      const [u] = await tx.query<{ id: string; email: string; email_normalized: string }>(
        `WITH r AS (UPDATE dashboard_password_resets SET used_at = now()
                     WHERE token_hash = $1 AND used_at IS NULL AND expires_at > now() RETURNING user_id)
         SELECT u.id, u.email, u.email_normalized FROM dashboard_users u JOIN r ON r.user_id = u.id`,
        [sha256Hex(cmd.token)],
      );
      if (!u) throw new AppError('token/invalid');
      await tx.query(`UPDATE dashboard_users SET password_hash = $2 WHERE id = $1`, [u.id, passwordHash]);
      await tx.query(`DELETE FROM dashboard_password_resets WHERE user_id = $1 AND used_at IS NULL`, [u.id]);
      const ended = await tx.exec(`UPDATE dashboard_sessions SET revoked_at = now() WHERE user_id = $1 AND revoked_at IS NULL`, [u.id]);
      // what the ended sessions handed out ends with them: an invitation's token went to whoever
      // held the session (a squatter who signed the address up before its owner took it over by
      // this reset would otherwise come back as an owner through one)
      const invitesWithdrawn = await withdrawPendingInvitations(this.events, tx, { actorId: u.id, inviterId: u.id, reason: 'password_reset' });
      await this.events.audit(tx, {
        tenantId: null,
        type: 'dashboard.password_reset',
        actorType: 'dashboard_user',
        actorId: u.id,
        targetType: 'dashboard_user',
        targetId: u.id,
        severity: 'medium',
        metadata: { sessions_ended: ended.rowCount, invites_withdrawn: invitesWithdrawn },
      });
      await this.mail.enqueue(tx, { tenantId: null, to: u.email, template: 'dashboard_password_changed', data: {} });
      return u;
    });
    await this.throttle.restartKnownAddresses('dashboard', user.email_normalized, cmd.client.ip);
  }
}
