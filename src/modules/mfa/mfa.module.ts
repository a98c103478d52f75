import { Module } from '@nestjs/common';
import { SessionsModule } from '../sessions/sessions.module';
import { UsersModule } from '../users/users.module';
import { DisableMfaHandler } from './disable-mfa/disable-mfa.handler';
import { EnrollmentTokenService } from './enrollment-token.service';
import { MfaConfirmationService } from './mfa-confirmation.service';
import { MfaController } from './mfa.controller';
import { MfaEnrollmentGuard } from './mfa-enrollment.guard';
import { MfaFactorsService } from './mfa-factors.service';
import { MfaLoginPolicy } from './mfa-login-policy.service';
import { RegenerateRecoveryCodesHandler } from './regenerate-recovery-codes/regenerate-recovery-codes.handler';
import { StepUpPasswordHandler } from './step-up/step-up-password.handler';
import { StepUpTokenService } from './step-up/step-up-token.service';
import { TotpSetupHandler } from './totp-setup/totp-setup.handler';
import { VerifyMfaLoginHandler } from './verify-login/verify-mfa-login.handler';
import { VerifyTotpSetupHandler } from './verify-setup/verify-totp-setup.handler';

/**
 * TOTP MFA (issue 5 items 5-6): enrollment, the MFA step of password sign-in (LoginPolicy hook,
 * registered by MfaLoginPolicy.onModuleInit), the tenant MFA policy (spec 2.8), recovery codes,
 * and step-up by password (spec 2.5). Exports StepUpTokenService for the other step-up methods.
 */
@Module({
  imports: [SessionsModule, UsersModule],
  controllers: [MfaController],
  providers: [
    MfaFactorsService,
    MfaConfirmationService,
    MfaLoginPolicy,
    EnrollmentTokenService,
    MfaEnrollmentGuard,
    StepUpTokenService,
    TotpSetupHandler,
    VerifyTotpSetupHandler,
    VerifyMfaLoginHandler,
    DisableMfaHandler,
    RegenerateRecoveryCodesHandler,
    StepUpPasswordHandler,
  ],
  exports: [StepUpTokenService],
})
export class MfaModule {}
