import { CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import { TokenRevocationService } from '../../../shared/auth/token-revocation.service';
import { PasswordHasher } from '../../../shared/crypto/password-hasher';
import { Db } from '../../../shared/db/db.service';
import { AppError, insufficientScope, InvalidTokenError } from '../../../shared/errors/app-error';
import { EventsService } from '../../../shared/events/events.service';
import { MailService } from '../../../shared/mail/mail.service';
import { LoginThrottleService, passwordSignInRealm } from '../../../shared/rate-limit/login-throttle.service';
import { SessionsService } from '../../sessions/sessions.service';
import { EmailCodes } from '../email-codes.service';
import { OneTimeTokens } from '../one-time-tokens.service';
import { ChangePasswordCommand } from './password.commands';
import { FailureAudit } from '../../../shared/events/failure-audit';

/**
 * The current password is the re-verification (a wrong one is 401 and counts against the same
 * failed sign-in throttle as login, per account and client address). The new password ends
 * every other session of the user and voids outstanding reset links, magic links and email
 * sign-in codes (as a reset does: a change is what a user does who fears someone else got in,
 * and a link asked for earlier would open a new session past it); the current session stays.
 * Agent tokens and guests cannot change a password.
 */
@CommandHandler(ChangePasswordCommand)
export class ChangePasswordHandler implements ICommandHandler<ChangePasswordCommand, void> {
  constructor(
    private readonly db: Db,
    private readonly hasher: PasswordHasher,
    private readonly throttle: LoginThrottleService,
    private readonly tokens: OneTimeTokens,
    private readonly codes: EmailCodes,
    private readonly sessions: SessionsService,
    private readonly revocation: TokenRevocationService,
    private readonly events: EventsService,
    private readonly mail: MailService,
    private readonly failures: FailureAudit,
  ) {}

  async execute(cmd: ChangePasswordCommand): Promise<void> {
    const p = cmd.user;
    if (p.claims.act) throw insufficientScope('Agent tokens cannot change a password');
    if (p.isAnonymous) throw insufficientScope('Guests have no password; register first');
    const [u] = await this.db.query<{ id: string; email: string; email_normalized: string | null; password_hash: string | null }>(
      `SELECT id, email, email_normalized, password_hash FROM users WHERE id = $1 AND tenant_id = $2 AND NOT is_anonymous`,
      [p.userId, p.tenantId],
    );
    if (!u) throw new InvalidTokenError();
    const realm = passwordSignInRealm(p.tenantId);
    const account = u.email_normalized ?? u.id;
    const ok = await this.throttle.judge(realm, account, cmd.client.ip, () => this.hasher.verifyOrDummy(u.password_hash, cmd.currentPassword));
    if (!ok) {
      await this.failures.userReauthFailed(p.tenantId, p.userId, 'password_change', cmd.client);
      throw new AppError('auth/invalid_credentials', 'The current password is wrong', { errors: [{ field: 'current_password', message: 'is wrong' }] });
    }
    const passwordHash = await this.hasher.hash(cmd.newPassword);
    const ended = await this.db.tx(async (tx) => {
      await this.sessions.lockUserSessions(tx, u.id);
      // conditional on the hash just verified: of two parallel changes, one wins
      const { rowCount } = await tx.exec(`UPDATE users SET password_hash = $3, updated_at = now() WHERE id = $1 AND tenant_id = $2 AND password_hash = $4`, [
        u.id,
        p.tenantId,
        passwordHash,
        u.password_hash,
      ]);
      if (!rowCount) throw new AppError('auth/invalid_credentials', 'The password was changed meanwhile');
      await this.tokens.voidForUser(tx, u.id, ['password_reset', 'magic_link']);
      if (u.email_normalized) await this.codes.voidLogin(tx, { tenantId: p.tenantId, emailNormalized: u.email_normalized });
      const sids = await this.sessions.revokeUserSessionsMarked(tx, u.id, 'password_changed', p.sessionId);
      await this.events.audit(tx, {
        tenantId: p.tenantId,
        type: 'user.password_changed',
        actorType: 'user',
        actorId: u.id,
        targetType: 'user',
        targetId: u.id,
        metadata: { sessions_ended: sids.length },
      });
      await this.mail.enqueue(tx, { tenantId: p.tenantId, to: u.email, template: 'password_changed', data: { reason: 'change' }, notice: true });
      return sids;
    });
    await this.revocation.markSessionsRevoked(ended);
  }
}
