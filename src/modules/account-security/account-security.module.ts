import { AgentsModule } from '../agents/agents.module';
import { Module, OnModuleInit } from '@nestjs/common';
import { MfaModule } from '../mfa/mfa.module';
import { SessionsModule } from '../sessions/sessions.module';
import { TenantsModule } from '../tenants/tenants.module';
import { UserEmailPolicy } from '../users/user-email-policy.service';
import { UsersModule } from '../users/users.module';
import { AccountSecurityController } from './account-security.controller';
import { EmailCodes } from './email-codes.service';
import { OtpCaptcha } from './email-otp/otp-captcha';
import { RequestEmailOtpHandler } from './email-otp/request-email-otp.handler';
import { VerifyEmailOtpHandler } from './email-otp/verify-email-otp.handler';
import { EmailDomainPolicy } from './email-policy/email-domain-policy.service';
import { ResendVerificationHandler } from './email-verification/resend-verification.handler';
import { VerificationMailer } from './email-verification/verification-mailer';
import { VerifyEmailHandler } from './email-verification/verify-email.handler';
import { RequestMagicLinkHandler } from './magic-link/request-magic-link.handler';
import { VerifyMagicLinkHandler } from './magic-link/verify-magic-link.handler';
import { OAuthParamsChecker } from './oauth-params';
import { OneTimeTokens } from './one-time-tokens.service';
import { PasswordlessSignIn } from './passwordless-sign-in.service';
import { ChangePasswordHandler } from './password/change-password.handler';
import { ForgotPasswordHandler } from './password/forgot-password.handler';
import { ResetPasswordHandler } from './password/reset-password.handler';
import { EmailDomainsHandlers } from './settings/email-domains.handlers';
import { PasskeyDomainHandlers } from './settings/passkey-domain.handlers';
import { UserScopesHandlers } from './settings/user-scopes.handlers';
import { SecuritySettingsController } from './settings/security-settings.controller';
import { GetSecuritySettingsHandler, UpdateSecuritySettingsHandler } from './settings/security-settings.handlers';
import { CompleteStepUpHandler } from './step-up/complete-step-up.handler';
import { InitiateStepUpHandler } from './step-up/initiate-step-up.handler';
import { StepUpController } from './step-up/step-up.controller';
import { StepUpService } from './step-up/step-up.service';
import { TenantFlags } from './tenant-flags';

/**
 * Account security (issue 5 items 1-4, 7-9): email verification, password reset and change,
 * magic link and email code sign-in, step-up by link and code, the tenant's security settings
 * and email domain policy. Plugs into the users module's seams: the address policy of every
 * place an email enters, and the verification mail sent with each registration.
 */
@Module({
  imports: [SessionsModule, UsersModule, TenantsModule, MfaModule, AgentsModule],
  controllers: [AccountSecurityController, StepUpController, SecuritySettingsController],
  providers: [
    OneTimeTokens,
    EmailCodes,
    TenantFlags,
    OAuthParamsChecker,
    OtpCaptcha,
    PasswordlessSignIn,
    StepUpService,
    EmailDomainPolicy,
    VerificationMailer,
    VerifyEmailHandler,
    ResendVerificationHandler,
    ForgotPasswordHandler,
    ResetPasswordHandler,
    ChangePasswordHandler,
    RequestMagicLinkHandler,
    VerifyMagicLinkHandler,
    RequestEmailOtpHandler,
    VerifyEmailOtpHandler,
    InitiateStepUpHandler,
    CompleteStepUpHandler,
    GetSecuritySettingsHandler,
    UpdateSecuritySettingsHandler,
    ...EmailDomainsHandlers,
    ...PasskeyDomainHandlers,
    ...UserScopesHandlers,
  ],
})
export class AccountSecurityModule implements OnModuleInit {
  constructor(
    private readonly userEmailPolicy: UserEmailPolicy,
    private readonly domainPolicy: EmailDomainPolicy,
    private readonly verification: VerificationMailer,
  ) {}

  onModuleInit(): void {
    this.userEmailPolicy.registerCheck((tenantId, email) => this.domainPolicy.assertAllowed(tenantId, email));
    // item 1: the verification mail commits with the registration (same transaction)
    this.userEmailPolicy.registerAfterRegister((tx, u) => this.verification.send(tx, u));
  }
}
