import { CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import { Db } from '../../../shared/db/db.service';
import { AppError } from '../../../shared/errors/app-error';
import { StepUpResponseDto } from '../../mfa/mfa.response.dto';
import { StepUpTokenService } from '../../mfa/step-up/step-up-token.service';
import { AMR_EMAIL_OTP, AMR_MAGIC_LINK } from '../account-security.constants';
import { EmailCodes } from '../email-codes.service';
import { OneTimeTokens } from '../one-time-tokens.service';
import { CompleteStepUpCommand } from './step-up.commands';
import { StepUpService } from './step-up.service';
import { TenantFlags } from '../tenant-flags';

/**
 * A step-up link works once, only for the session that asked and the address it was sent to
 * (another session of the same user, another user or tenant: 400 token/invalid, and the link
 * stays usable by its session). A step-up code has the sign-in code's rules: at most 5
 * evaluations counted atomically, wrong codes also counted per user over every code and session
 * (429 auth/login_throttled past the limit), constant-time comparison, one winner. Success: a fresh access
 * token of the same session, `amr` plus `email` (link) or `otp` (code), `step_up_at` now.
 */
@CommandHandler(CompleteStepUpCommand)
export class CompleteStepUpHandler implements ICommandHandler<CompleteStepUpCommand, StepUpResponseDto> {
  constructor(
    private readonly db: Db,
    private readonly stepUp: StepUpService,
    private readonly flags: TenantFlags,
    private readonly tokens: OneTimeTokens,
    private readonly codes: EmailCodes,
    private readonly stepUpTokens: StepUpTokenService,
  ) {}

  async execute(cmd: CompleteStepUpCommand): Promise<StepUpResponseDto> {
    const s = await this.stepUp.subject(cmd.user);
    await this.flags.requireChannel(s.tenantId, cmd.channel);
    if (cmd.channel === 'magic_link') {
      const found = await this.tokens.find(this.db, s.tenantId, 'step_up_magic_link', cmd.secret);
      if (!found || found.user_id !== s.userId || found.session_id !== s.sessionId || found.email_normalized !== s.emailNormalized) {
        throw new AppError('token/invalid');
      }
      const used = await this.db.tx((tx) => this.tokens.consume(tx, s.tenantId, 'step_up_magic_link', cmd.secret));
      if (!used) throw new AppError('token/invalid');
      return this.stepUpTokens.issue(cmd.user, AMR_MAGIC_LINK[0]);
    }
    const target = { purpose: 'step_up', tenantId: s.tenantId, userId: s.userId, sessionId: s.sessionId } as const;
    const row = await this.codes.attempt(target, cmd.secret, cmd.client.ip);
    if (!row) throw new AppError('otp/invalid');
    if (!(await this.db.tx((tx) => this.codes.consume(tx, row)))) throw new AppError('otp/invalid');
    await this.codes.signedIn(target, cmd.client.ip);
    return this.stepUpTokens.issue(cmd.user, AMR_EMAIL_OTP[0]);
  }
}
