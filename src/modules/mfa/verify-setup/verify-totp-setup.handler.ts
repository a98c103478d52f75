import { Inject, Logger } from '@nestjs/common';
import { CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import { APP_CONFIG, AppConfig } from '../../../config/config';
import { TokenRevocationService } from '../../../shared/auth/token-revocation.service';
import { Db } from '../../../shared/db/db.service';
import { AppError, InvalidTokenError } from '../../../shared/errors/app-error';
import { EventsService } from '../../../shared/events/events.service';
import { MailService } from '../../../shared/mail/mail.service';
import { noticeMfaChange } from '../mfa-notice';
import { EnrollmentTokenService } from '../enrollment-token.service';
import { LoginThrottleService } from '../../../shared/rate-limit/login-throttle.service';
import { MfaFactorsService, setupCaller } from '../mfa-factors.service';
import { SessionsService } from '../../sessions/sessions.service';
import { RecoveryCodesResponseDto } from '../mfa.response.dto';
import { mfaThrottleLimits, mfaThrottleRealm } from '../mfa-throttle';
import { VerifyTotpSetupCommand } from './verify-totp-setup.command';

class WrongCode extends Error {}

/** The pending enrollment was begun by another session (or another sign-in's enrollment-only token). */
const notThisCallers = () => new AppError('mfa/setup_required', 'The pending enrollment was started by another session; call POST /v1/auth/mfa/totp/setup from this one');

/**
 * Enables the pending factor when the code matches its seed (the code's time step counts as used,
 * so it cannot sign in again), and replaces the recovery codes with 10 new ones, stored hashed.
 * The user's other sessions below AAL2 end with it (their refresh tokens and access tokens stop
 * working), as Supabase Auth does: a password-only session opened before, perhaps a stolen one,
 * would otherwise go on refreshing at AAL1 past the second factor. The caller's own session
 * stays (its sign-in is at most 300 s old, setup's check), also when it calls with the
 * enrollment-only token its refresh or step-up got (`sid`); a sign-in's enrollment-only token has
 * no session.
 */
@CommandHandler(VerifyTotpSetupCommand)
export class VerifyTotpSetupHandler implements ICommandHandler<VerifyTotpSetupCommand, RecoveryCodesResponseDto> {
  private readonly log = new Logger('VerifyTotpSetup');

  constructor(
    private readonly db: Db,
    private readonly factors: MfaFactorsService,
    private readonly events: EventsService,
    private readonly throttle: LoginThrottleService,
    private readonly enrollment: EnrollmentTokenService,
    private readonly mail: MailService,
    private readonly sessions: SessionsService,
    private readonly revocation: TokenRevocationService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  async execute({ user, code, client }: VerifyTotpSetupCommand): Promise<RecoveryCodesResponseDto> {
    // another caller's pending enrollment is refused before the throttle: its calls, however many,
    // must hold none of the owner's attempts, not even while in flight (checked again under lock)
    const pendingBy = await this.factors.pendingSetupBy(this.db, user.tenantId, user.userId);
    if (pendingBy && pendingBy !== setupCaller(user)) throw notThisCallers();
    const realm = mfaThrottleRealm(user.tenantId);
    await this.throttle.attempt(realm, user.userId, client.ip, mfaThrottleLimits(this.config));
    try {
      const { codes, ended } = await this.db.tx(async (tx) => {
        // the order of an erasure: the sessions, then the user row, then the factors. The user row
        // is held (KEY SHARE) until the commit: an erasure committed while this waited leaves none
        // (401, as setup answers), one in flight waits
        const locked = await this.sessions.lockUserSessions(tx, user.userId);
        const [live] = await tx.query(`SELECT 1 FROM users WHERE id = $1 AND tenant_id = $2 FOR KEY SHARE`, [user.userId, user.tenantId]);
        if (!live) throw new InvalidTokenError('invalid_token', 'The user no longer exists');
        const factor = await this.factors.lockFactor(tx, user.tenantId, user.userId);
        if (!factor) throw new AppError('mfa/setup_required', 'Call POST /v1/auth/mfa/totp/setup first');
        if (factor.enabled_at) throw new AppError('mfa/already_enabled');
        // another session's enrollment (or another sign-in's token): not this caller's to complete,
        // and not counted against the user (a stale session must not use up the owner's allowance)
        if (factor.setup_by && factor.setup_by !== setupCaller(user)) throw notThisCallers();
        const step = this.factors.matchStep(user.userId, factor, code);
        if (step === null) throw new WrongCode();
        if (!(await this.factors.enable(tx, factor.id, step))) throw new AppError('mfa/already_enabled');
        const recovery = await this.factors.replaceRecoveryCodes(tx, user.tenantId, user.userId);
        await this.enrollment.spend(tx, user.userId);
        // (a session a sign-in opened since the lock above stays, as one opened just after the commit would)
        const ended = await this.sessions.revokeSessionsBelowAal2(tx, user.userId, 'mfa_enabled', locked, user.sessionId);
        await this.events.audit(tx, {
          tenantId: user.tenantId,
          type: 'user.mfa_enabled',
          actorType: 'user',
          actorId: user.userId,
          targetType: 'user',
          targetId: user.userId,
          severity: 'medium',
          metadata: { factor: 'totp', sessions_ended: ended.length },
        });
        await noticeMfaChange(tx, this.mail, user, 'enabled');
        return { codes: recovery, ended };
      });
      // the factor is on and the recovery codes exist only in this answer: a Redis that refuses the
      // marks must not turn it into a 503 (unlike a logout's). The sessions' refresh tokens are
      // dead already; their access tokens may work until the cached state expires (at most
      // ACCESS_TOKEN_TTL_SECONDS + 60 s).
      await this.revocation.markSessionsRevoked(ended).catch((e: Error) => this.log.warn(`marking sessions ended after MFA enrollment: ${e.message}`));
      await this.throttle.succeeded(realm, user.userId, client.ip);
      return { recovery_codes: codes };
    } catch (e) {
      if (e instanceof WrongCode) {
        await this.throttle.failed(realm, user.userId, client.ip);
        throw new AppError('mfa/invalid_code');
      }
      // not a wrong code (no setup yet, enabled already, a fault): nothing to count against the user
      await this.throttle.release(realm, user.userId, client.ip);
      throw e;
    }
  }
}
