import { CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import { Inject } from '@nestjs/common';
import { APP_CONFIG, AppConfig } from '../../../config/config';
import { Db } from '../../../shared/db/db.service';
import { EventsService } from '../../../shared/events/events.service';
import { normalizeEmail } from '../../users/email';
import { ACCEPTED, AcceptedResponse } from '../account-security.constants';
import { MailLimits } from '../../../shared/rate-limit/mail-limits.service';
import { OneTimeTokens } from '../one-time-tokens.service';
import { RequestTrail } from '../../../shared/events/request-trail';
import { VerificationMailer } from './verification-mailer';
import { ResendVerificationCommand } from './verify-email.command';
import { findAccountUser } from '../account-user';

/**
 * Contract: 202 with the same body whether or not the address exists (or is already verified);
 * only an unverified account gets a new link, which replaces the earlier ones.
 */
@CommandHandler(ResendVerificationCommand)
export class ResendVerificationHandler implements ICommandHandler<ResendVerificationCommand, AcceptedResponse> {
  constructor(
    private readonly db: Db,
    private readonly limits: MailLimits,
    private readonly tokens: OneTimeTokens,
    private readonly mailer: VerificationMailer,
    private readonly trail: RequestTrail,
    private readonly events: EventsService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  async execute(cmd: ResendVerificationCommand): Promise<AcceptedResponse> {
    const tenantId = cmd.apiKey.tenantId;
    const email = normalizeEmail(cmd.email);
    await this.limits.enforce('verify-resend', tenantId, email, cmd.client.ip);
    await this.db.tx(async (tx) => {
      const user = await findAccountUser(tx, tenantId, email, { unverifiedOnly: true });
      if (!user) {
        // the statement a link costs, writing nothing, then the trail (comparable work)
        await this.tokens.issue(tx, { tenantId, userId: null, kind: 'email_verification', emailNormalized: email, ttlSeconds: this.config.EMAIL_VERIFICATION_TTL_SECONDS });
        await this.trail.nothingSent(tx, tenantId, 'user.verification_resend_requested', email, cmd.client.ip);
        return;
      }
      await this.mailer.send(tx, { tenantId, tenantName: cmd.apiKey.tenant.name, userId: user.id, email: user.email });
      await this.events.audit(tx, { tenantId, type: 'user.verification_resend_requested', actorType: 'anonymous', targetType: 'user', targetId: user.id, metadata: { mail_sent: true } });
    });
    return ACCEPTED;
  }
}
