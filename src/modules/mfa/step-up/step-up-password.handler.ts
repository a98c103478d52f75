import { CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import { PasswordHasher } from '../../../shared/crypto/password-hasher';
import { Db } from '../../../shared/db/db.service';
import { AppError, insufficientScope, InvalidTokenError } from '../../../shared/errors/app-error';
import { LoginThrottleService, passwordSignInRealm } from '../../../shared/rate-limit/login-throttle.service';
import { SessionsService } from '../../sessions/sessions.service';
import { StepUpResponseDto } from '../mfa.response.dto';
import { StepUpPasswordCommand } from './step-up-password.command';
import { StepUpTokenService } from './step-up-token.service';
import { FailureAudit } from '../../../shared/events/failure-audit';

/**
 * A wrong password answers 401 auth/invalid_credentials and counts in the same failed-credential
 * throttle as password login of that account (realm `user:<tenant>`), so step-up cannot be used
 * to guess passwords beside login.
 */
@CommandHandler(StepUpPasswordCommand)
export class StepUpPasswordHandler implements ICommandHandler<StepUpPasswordCommand, StepUpResponseDto> {
  constructor(
    private readonly db: Db,
    private readonly hasher: PasswordHasher,
    private readonly throttle: LoginThrottleService,
    private readonly stepUp: StepUpTokenService,
    private readonly sessions: SessionsService,
    private readonly failures: FailureAudit,
  ) {}

  async execute({ user, password, client }: StepUpPasswordCommand): Promise<StepUpResponseDto> {
    if (user.isAnonymous || user.claims.act) throw insufficientScope('Step-up needs a signed-in (non-guest, non-delegated) user');
    const [u] = await this.db.query<{ password_hash: string | null; email_normalized: string | null }>(
      `SELECT password_hash, email_normalized FROM users WHERE id = $1 AND tenant_id = $2`,
      [user.userId, user.tenantId],
    );
    if (!u) throw new InvalidTokenError();
    // an ended session, or one past its maximum age, gets no token: said before the password is checked
    if (user.sessionId) await this.sessions.assertCanStepUp(user.sessionId, user.userId, user.tenantId);
    const realm = passwordSignInRealm(user.tenantId);
    const account = u.email_normalized ?? user.userId;
    const ok = await this.throttle.judge(realm, account, client.ip, () => this.hasher.verifyOrDummy(u.password_hash, password));
    if (!ok) {
      await this.failures.userReauthFailed(user.tenantId, user.userId, 'step_up', client);
      throw new AppError('auth/invalid_credentials', 'The password is wrong');
    }
    return this.stepUp.issue(user, 'pwd');
  }
}
