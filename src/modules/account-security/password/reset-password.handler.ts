import { CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import { TokenRevocationService } from '../../../shared/auth/token-revocation.service';
import { PasswordHasher } from '../../../shared/crypto/password-hasher';
import { Db } from '../../../shared/db/db.service';
import { AppError } from '../../../shared/errors/app-error';
import { EventsService } from '../../../shared/events/events.service';
import { MailService } from '../../../shared/mail/mail.service';
import { LoginThrottleService, passwordSignInRealm } from '../../../shared/rate-limit/login-throttle.service';
import { SessionsService } from '../../sessions/sessions.service';
import { OneTimeTokens } from '../one-time-tokens.service';
import { EmailCodes } from '../email-codes.service';
import { ResetPasswordCommand } from './password.commands';

/**
 * Single use (conditional update: of parallel resets with one link, one wins), bound to the
 * tenant and to the address the link was sent to. The new password ends every session of the
 * user (refresh tokens in the same transaction, access tokens through the revocation list after
 * commit), voids the other reset and sign-in links, and the user is told by mail.
 *
 * A reset does not mark the address verified: email_verified changes only through the
 * verification link or a passwordless sign-in, so a reset link can never stand in for a
 * verification (a token of one kind never counts as another). It does mark the password as set
 * by the mailbox owner (`password_proven`), so a later first passwordless sign-in keeps it.
 */
@CommandHandler(ResetPasswordCommand)
export class ResetPasswordHandler implements ICommandHandler<ResetPasswordCommand, void> {
  constructor(
    private readonly db: Db,
    private readonly tokens: OneTimeTokens,
    private readonly hasher: PasswordHasher,
    private readonly sessions: SessionsService,
    private readonly revocation: TokenRevocationService,
    private readonly events: EventsService,
    private readonly mail: MailService,
    private readonly codes: EmailCodes,
    private readonly throttle: LoginThrottleService,
  ) {}

  async execute(cmd: ResetPasswordCommand): Promise<void> {
    const tenantId = cmd.apiKey.tenantId;
    // a dead link costs no password hash
    if (!(await this.tokens.find(this.db, tenantId, 'password_reset', cmd.token))) throw new AppError('token/invalid');
    const passwordHash = await this.hasher.hash(cmd.password);
    const ended = await this.db.tx(async (tx) => {
      const row = await this.tokens.consume(tx, tenantId, 'password_reset', cmd.token);
      if (!row) throw new AppError('token/invalid');
      await this.sessions.lockUserSessions(tx, row.user_id);
      const [u] = await tx.query<{ id: string; email: string }>(
        `UPDATE users SET password_hash = $4, password_proven = true, updated_at = now()
          WHERE id = $1 AND tenant_id = $2 AND email_normalized = $3 AND NOT is_anonymous RETURNING id, email`,
        [row.user_id, tenantId, row.email_normalized, passwordHash],
      );
      if (!u) throw new AppError('token/invalid');
      await this.tokens.voidForUser(tx, u.id, ['password_reset', 'magic_link', 'step_up_magic_link']);
      await this.codes.voidLogin(tx, { tenantId, emailNormalized: row.email_normalized });
      const sids = await this.sessions.revokeUserSessionsMarked(tx, u.id, 'password_reset');
      await this.events.audit(tx, {
        tenantId,
        type: 'user.password_reset',
        actorType: 'user',
        actorId: u.id,
        targetType: 'user',
        targetId: u.id,
        severity: 'medium',
        metadata: { sessions_ended: sids.length },
      });
      await this.mail.enqueue(tx, { tenantId, to: u.email, template: 'password_changed', data: { tenant_name: cmd.apiKey.tenant.name, reason: 'reset' } });
      return { sids, email: row.email_normalized };
    });
    await this.revocation.markSessionsRevoked(ended.sids);
    // the reset proved the mailbox from this address: it is known to the failed sign-in throttle,
    // so an owner kept out of a new address by an attack on the account signs in here at once, and
    // the only one (whoever registered the address before its owner keeps no exempt address)
    await this.throttle.restartKnownAddresses(passwordSignInRealm(tenantId), ended.email, cmd.client.ip);
  }
}
