import { CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import { Db } from '../../../shared/db/db.service';
import { EventsService } from '../../../shared/events/events.service';
import { MailService } from '../../../shared/mail/mail.service';
import { mailboxSpelling, normalizeEmail } from '../../users/email';
import { UserEmailPolicy } from '../../users/user-email-policy.service';
import { ACCEPTED, AcceptedResponse, EMAIL_OTP_TTL_SECONDS } from '../account-security.constants';
import { EmailCodes } from '../email-codes.service';
import { MailLimits } from '../../../shared/rate-limit/mail-limits.service';
import { OAuthParamsChecker } from '../oauth-params';
import { RequestTrail } from '../../../shared/events/request-trail';
import { bindingHash } from '../resume-binding';
import { TenantFlags } from '../tenant-flags';
import { RequestEmailOtpCommand } from './email-otp.commands';
import { OtpCaptcha } from './otp-captcha';
import { findAccountUser } from '../account-user';

/**
 * Issue 5 item 4: off until the tenant enables it; limited per address and per client address
 * (the resend throttle), captcha when the tenant requires one, oauth_params checked, and with
 * `login_or_create` the tenant's address policy (an account may be created). Then the same 202
 * for every address: an address with an account, or any address under login_or_create, gets a
 * code that replaces its earlier one; `login` for an unknown address sends nothing.
 */
@CommandHandler(RequestEmailOtpCommand)
export class RequestEmailOtpHandler implements ICommandHandler<RequestEmailOtpCommand, AcceptedResponse> {
  constructor(
    private readonly db: Db,
    private readonly flags: TenantFlags,
    private readonly captcha: OtpCaptcha,
    private readonly oauth: OAuthParamsChecker,
    private readonly policy: UserEmailPolicy,
    private readonly limits: MailLimits,
    private readonly codes: EmailCodes,
    private readonly mail: MailService,
    private readonly events: EventsService,
    private readonly trail: RequestTrail,
  ) {}

  async execute(cmd: RequestEmailOtpCommand): Promise<AcceptedResponse> {
    const tenantId = cmd.apiKey.tenantId;
    const { body } = cmd;
    const flags = await this.flags.requireEmailOtp(tenantId);
    const email = normalizeEmail(body.email);
    // the client's limit, the captcha and the request's own parameters before the recipient's quota
    await this.limits.enforceClient(cmd.client.ip);
    if (flags.email_otp_captcha_required) await this.captcha.verify(body.captcha_token, cmd.client.ip);
    const oauthParams = await this.oauth.check(tenantId, body.oauth_params);
    await this.limits.enforceAddress('email-otp', tenantId, email);
    const mode = body.mode ?? 'login';
    // the policy is about the address, so it is checked for every address under login_or_create
    if (mode === 'login_or_create') await this.policy.assertAllowed(tenantId, email);
    await this.db.tx(async (tx) => {
      // again under share locks, as for a magic link (TenantFlags.hold)
      await this.flags.hold(tx, tenantId, 'email_otp');
      await this.oauth.hold(tx, tenantId, oauthParams);
      const user = await findAccountUser(tx, tenantId, email);
      if (!user && mode === 'login') {
        this.codes.newCode();
        return this.trail.nothingSent(tx, tenantId, 'user.email_otp_requested', email, cmd.client.ip);
      }
      const code = await this.codes.issueLogin(tx, { tenantId, emailNormalized: email, userId: user?.id ?? null, mode, bindingHash: bindingHash(body.resume_binding), oauthParams });
      await this.mail.enqueue(tx, {
        tenantId,
        to: user?.email ?? mailboxSpelling(body.email),
        template: 'email_otp',
        data: { tenant_name: cmd.apiKey.tenant.name, expires_in_minutes: EMAIL_OTP_TTL_SECONDS / 60 },
        secret: { code },
      });
      await this.events.audit(tx, {
        tenantId,
        type: 'user.email_otp_requested',
        actorType: 'anonymous',
        targetType: user ? 'user' : null,
        targetId: user?.id ?? null,
        metadata: { mail_sent: true, mode },
      });
    });
    return ACCEPTED;
  }
}
