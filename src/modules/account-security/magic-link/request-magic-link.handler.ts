import { CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import { Db } from '../../../shared/db/db.service';
import { EventsService } from '../../../shared/events/events.service';
import { MailService } from '../../../shared/mail/mail.service';
import { normalizeEmail } from '../../users/email';
import { ACCEPTED, AcceptedResponse, MAGIC_LINK_TTL_SECONDS } from '../account-security.constants';
import { MailLimits } from '../../../shared/rate-limit/mail-limits.service';
import { OAuthParamsChecker } from '../oauth-params';
import { OneTimeTokens } from '../one-time-tokens.service';
import { RequestTrail } from '../../../shared/events/request-trail';
import { bindingHash } from '../resume-binding';
import { TenantFlags } from '../tenant-flags';
import { RequestMagicLinkCommand } from './magic-link.commands';
import { findAccountUser } from '../account-user';

/**
 * Issue 5 item 3: off until the tenant enables it; oauth_params checked first (an unregistered
 * redirect_uri is 400 and no mail, whatever the address); then the same 202 for every address
 * after comparable work. Only existing accounts get a link (15 minutes, single use, bound to the
 * tenant, replacing earlier links); magic links never create accounts.
 */
@CommandHandler(RequestMagicLinkCommand)
export class RequestMagicLinkHandler implements ICommandHandler<RequestMagicLinkCommand, AcceptedResponse> {
  constructor(
    private readonly db: Db,
    private readonly flags: TenantFlags,
    private readonly oauth: OAuthParamsChecker,
    private readonly limits: MailLimits,
    private readonly tokens: OneTimeTokens,
    private readonly mail: MailService,
    private readonly events: EventsService,
    private readonly trail: RequestTrail,
  ) {}

  async execute(cmd: RequestMagicLinkCommand): Promise<AcceptedResponse> {
    const tenantId = cmd.apiKey.tenantId;
    await this.flags.requireMagicLink(tenantId);
    const oauthParams = await this.oauth.check(tenantId, cmd.body.oauth_params);
    const email = normalizeEmail(cmd.body.email);
    await this.limits.enforce('magic-link', tenantId, email, cmd.client.ip);
    await this.db.tx(async (tx) => {
      // again under share locks: a switch-off or a revocation of the client committed meanwhile
      // is seen, one under way waits for this link and voids it (TenantFlags.hold)
      await this.flags.hold(tx, tenantId, 'magic_link');
      await this.oauth.hold(tx, tenantId, oauthParams);
      const user = await findAccountUser(tx, tenantId, email);
      const token = await this.tokens.issue(tx, {
        tenantId,
        userId: user?.id ?? null,
        kind: 'magic_link',
        emailNormalized: email,
        ttlSeconds: MAGIC_LINK_TTL_SECONDS,
        bindingHash: bindingHash(cmd.body.resume_binding),
        oauthParams,
      });
      if (!user) return this.trail.nothingSent(tx, tenantId, 'user.magic_link_requested', email, cmd.client.ip);
      await this.mail.enqueue(tx, {
        tenantId,
        to: user.email,
        template: 'magic_link',
        data: { tenant_name: cmd.apiKey.tenant.name, expires_in_minutes: MAGIC_LINK_TTL_SECONDS / 60 },
        secret: { token },
      });
      await this.events.audit(tx, {
        tenantId,
        type: 'user.magic_link_requested',
        actorType: 'anonymous',
        targetType: 'user',
        targetId: user.id,
        metadata: { mail_sent: true, oauth_client_id: oauthParams?.client_id ?? null },
      });
    });
    return ACCEPTED;
  }
}
