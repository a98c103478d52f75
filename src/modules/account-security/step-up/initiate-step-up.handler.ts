import { CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import { Db } from '../../../shared/db/db.service';
import { EventsService } from '../../../shared/events/events.service';
import { MailService } from '../../../shared/mail/mail.service';
import { EMAIL_OTP_TTL_SECONDS, MAGIC_LINK_TTL_SECONDS } from '../account-security.constants';
import { EmailCodes } from '../email-codes.service';
import { MailLimits } from '../../../shared/rate-limit/mail-limits.service';
import { OneTimeTokens } from '../one-time-tokens.service';
import { InitiateStepUpCommand } from './step-up.commands';
import { StepUpInitiatedResponse } from './step-up.request.dto';
import { StepUpService } from './step-up.service';
import { TenantFlags } from '../tenant-flags';

/**
 * spec 2.5 step-up by magic link or email code: a link (15 minutes) or 6-digit code (10
 * minutes) bound to the bearer's session, replacing the session's earlier one, mailed to the
 * account's address; limited per account and per client address like every mail.
 */
@CommandHandler(InitiateStepUpCommand)
export class InitiateStepUpHandler implements ICommandHandler<InitiateStepUpCommand, StepUpInitiatedResponse> {
  constructor(
    private readonly db: Db,
    private readonly stepUp: StepUpService,
    private readonly flags: TenantFlags,
    private readonly limits: MailLimits,
    private readonly tokens: OneTimeTokens,
    private readonly codes: EmailCodes,
    private readonly mail: MailService,
    private readonly events: EventsService,
  ) {}

  async execute(cmd: InitiateStepUpCommand): Promise<StepUpInitiatedResponse> {
    const s = await this.stepUp.subject(cmd.user);
    const tenantId = s.tenantId;
    await this.flags.requireChannel(tenantId, cmd.channel);
    await this.limits.enforce(`step-up-${cmd.channel}`, tenantId, s.emailNormalized, cmd.client.ip);
    // The hint is text of the caller's choosing: mailed only to a verified address, never to one
    // that whoever registered it may not own (it would carry their words, under the tenant's name).
    const hint = (s.emailVerified && cmd.actionHint?.replace(/[\r\n\t]+/g, ' ').trim()) || undefined;
    const link = cmd.channel === 'magic_link';
    await this.db.tx(async (tx) => {
      // again under a share lock, as for a sign-in link (TenantFlags.hold)
      await this.flags.hold(tx, tenantId, cmd.channel);
      const secret = link
        ? { token: await this.tokens.issue(tx, { tenantId, userId: s.userId, kind: 'step_up_magic_link', emailNormalized: s.emailNormalized, ttlSeconds: MAGIC_LINK_TTL_SECONDS, sessionId: s.sessionId }) }
        : { code: await this.codes.issueStepUp(tx, { tenantId, userId: s.userId, sessionId: s.sessionId, emailNormalized: s.emailNormalized }) };
      await this.mail.enqueue(tx, {
        tenantId,
        to: s.email,
        template: link ? 'magic_link' : 'email_otp',
        data: { purpose: 'step_up', ...(hint ? { action_hint: hint } : {}), expires_in_minutes: (link ? MAGIC_LINK_TTL_SECONDS : EMAIL_OTP_TTL_SECONDS) / 60 },
        secret,
      });
      await this.events.audit(tx, {
        tenantId,
        type: 'user.step_up_requested',
        actorType: 'user',
        actorId: s.userId,
        targetType: 'session',
        targetId: s.sessionId,
        metadata: { method: cmd.channel },
      });
    });
    return { status: 'accepted', expires_in: link ? MAGIC_LINK_TTL_SECONDS : EMAIL_OTP_TTL_SECONDS };
  }
}
