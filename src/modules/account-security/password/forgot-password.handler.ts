import { CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import { Db } from '../../../shared/db/db.service';
import { EventsService } from '../../../shared/events/events.service';
import { MailService } from '../../../shared/mail/mail.service';
import { normalizeEmail } from '../../users/email';
import { ACCEPTED, AcceptedResponse, PASSWORD_RESET_TTL_SECONDS } from '../account-security.constants';
import { MailLimits } from '../../../shared/rate-limit/mail-limits.service';
import { OneTimeTokens } from '../one-time-tokens.service';
import { RequestTrail } from '../../../shared/events/request-trail';
import { ForgotPasswordCommand } from './password.commands';
import { findAccountUser } from '../account-user';

/**
 * OWASP Forgot Password: the same 202 body for every address, after comparable work (the token
 * statement runs for unknown addresses too, writing nothing, and the trail stands in for the
 * mail), limited per address and per client address before anything is looked up. The link
 * (256 random bits, stored as SHA-256) lives 30 minutes and replaces earlier ones.
 */
@CommandHandler(ForgotPasswordCommand)
export class ForgotPasswordHandler implements ICommandHandler<ForgotPasswordCommand, AcceptedResponse> {
  constructor(
    private readonly db: Db,
    private readonly limits: MailLimits,
    private readonly tokens: OneTimeTokens,
    private readonly mail: MailService,
    private readonly events: EventsService,
    private readonly trail: RequestTrail,
  ) {}

  async execute(cmd: ForgotPasswordCommand): Promise<AcceptedResponse> {
    const tenantId = cmd.apiKey.tenantId;
    const email = normalizeEmail(cmd.email);
    await this.limits.enforce('forgot', tenantId, email, cmd.client.ip);
    await this.db.tx(async (tx) => {
      const user = await findAccountUser(tx, tenantId, email);
      const token = await this.tokens.issue(tx, { tenantId, userId: user?.id ?? null, kind: 'password_reset', emailNormalized: email, ttlSeconds: PASSWORD_RESET_TTL_SECONDS });
      if (!user) return this.trail.nothingSent(tx, tenantId, 'user.password_reset_requested', email, cmd.client.ip);
      await this.mail.enqueue(tx, {
        tenantId,
        to: user.email,
        template: 'password_reset',
        data: { tenant_name: cmd.apiKey.tenant.name, expires_in_minutes: PASSWORD_RESET_TTL_SECONDS / 60 },
        secret: { token },
      });
      await this.events.audit(tx, { tenantId, type: 'user.password_reset_requested', actorType: 'anonymous', targetType: 'user', targetId: user.id, metadata: { mail_sent: true } });
    });
    return ACCEPTED;
  }
}
