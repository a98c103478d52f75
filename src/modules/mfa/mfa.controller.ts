import { Body, Controller, HttpCode, Post } from '@nestjs/common';
import { CommandBus } from '@nestjs/cqrs';
import { ApiNoContentResponse, ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import { ApiKeyPrincipal, ClientInfo, ClientInfoValue, CurrentApiKey, CurrentUser, UserPrincipal } from '../../shared/auth/auth-context';
import { ApiKeyAuth, BearerAuth } from '../../shared/auth/guards';
import { RequireStepUp } from '../../shared/auth/step-up.guard';
import { ApiProblems, Problems } from '../../shared/http/api-docs';
import { PASSWORD_PROOF_PER_IP, RateLimit } from '../../shared/rate-limit/rate-limit.decorator';
import { PasswordlessTokenResponseDto } from '../sessions/sessions.response.dto';
import { TokenResponse } from '../sessions/sessions.service';
import { DisableMfaCommand } from './disable-mfa/disable-mfa.command';
import { MfaDisableRequestDto } from './disable-mfa/disable-mfa.request.dto';
import { enrollmentProofRule } from './enrollment-token.service';
import { MfaEnrollmentAuth, MfaEnrollmentGuard } from './mfa-enrollment.guard';
import { RecoveryCodesResponseDto, StepUpResponseDto, TotpSetupResponseDto } from './mfa.response.dto';
import { RegenerateRecoveryCodesCommand } from './regenerate-recovery-codes/regenerate-recovery-codes.command';
import { MfaRegenerateCodesRequestDto } from './regenerate-recovery-codes/regenerate-recovery-codes.request.dto';
import { StepUpPasswordCommand } from './step-up/step-up-password.command';
import { StepUpPasswordRequestDto } from './step-up/step-up-password.request.dto';
import { TotpSetupCommand } from './totp-setup/totp-setup.command';
import { VerifyMfaLoginCommand } from './verify-login/verify-mfa-login.command';
import { MfaVerifyLoginRequestDto } from './verify-login/verify-mfa-login.request.dto';
import { VerifyTotpSetupCommand } from './verify-setup/verify-totp-setup.command';
import { MfaVerifySetupRequestDto } from './verify-setup/verify-totp-setup.request.dto';

/** Step-up freshness MFA disable requires (spec 2.5 `@RequireStepUp`), seconds. */
export const MFA_DISABLE_STEP_UP_MAX_AGE = 300;
/**
 * How recent the proof of the account (a sign-in's `auth_time` or a step-up) must be to start TOTP
 * enrollment, seconds: a stolen session alone could otherwise enroll an authenticator of its own
 * and lock the owner out (a password reset keeps the factor).
 */
export const MFA_ENROLL_PROOF_MAX_AGE = 300;

@ApiTags('mfa and step-up')
@Controller('v1/auth')
export class MfaController {
  constructor(private readonly commandBus: CommandBus) {}

  @Post('mfa/totp/setup')
  @HttpCode(200)
  @RequireStepUp(MFA_ENROLL_PROOF_MAX_AGE, { orSignIn: true, auth: MfaEnrollmentGuard, proofRule: enrollmentProofRule })
  @ApiOperation({
    summary: 'Start TOTP enrollment: a new seed and its otpauth URL; 403 auth/step_up_required without a sign-in or step-up in the last 5 minutes',
    description:
      'A regular bearer token whose `auth_time` or `step_up_at` is at most 300 seconds old, or the enrollment-only token of a sign-in as recent. Otherwise the client steps up (spec 2.5: password, magic link or email code) and retries.',
  })
  @ApiResponse({ status: 200, type: TotpSetupResponseDto })
  @ApiProblems('request/invalid', ...Problems.bearer, 'auth/forbidden', 'auth/step_up_required', 'mfa/already_enabled')
  setup(@CurrentUser() user: UserPrincipal): Promise<TotpSetupResponseDto> {
    return this.commandBus.execute(new TotpSetupCommand(user));
  }

  // no freshness check of its own: it only enables the pending seed, which only setup's caller,
  // who proved the account recently, was shown
  @Post('mfa/totp/verify-setup')
  @HttpCode(200)
  @MfaEnrollmentAuth()
  @ApiOperation({
    summary: 'Enable TOTP with a code of the new seed; answers 10 single-use recovery codes (shown once)',
    description:
      "Only the caller that started the enrollment (its session, or its sign-in's enrollment-only token) completes it; another session gets 409 mfa/setup_required. The user's other sessions below AAL2 end with it (their refresh and access tokens are refused); the enrolling session (the bearer's, or the one an enrollment-only token from a refresh or step-up names) and AAL2 sessions go on.",
  })
  @ApiResponse({ status: 200, type: RecoveryCodesResponseDto })
  @ApiProblems(...Problems.input, ...Problems.bearer, 'auth/forbidden', 'mfa/invalid_code', 'mfa/already_enabled', 'mfa/setup_required', 'auth/login_throttled')
  verifySetup(@CurrentUser() user: UserPrincipal, @Body() body: MfaVerifySetupRequestDto, @ClientInfo() client: ClientInfoValue): Promise<RecoveryCodesResponseDto> {
    return this.commandBus.execute(new VerifyTotpSetupCommand(user, body.code, client));
  }

  @Post('mfa/verify')
  @HttpCode(200)
  @ApiKeyAuth()
  @RateLimit({ bucket: 'mfa-verify', by: 'ip', limit: (c) => c.RATE_LIMIT_MFA_VERIFY_PER_IP_PER_MIN, windowSeconds: 60 })
  @ApiOperation({ summary: 'Second sign-in step: challenge token plus a TOTP or recovery code; token response with aal AAL2' })
  @ApiResponse({ status: 200, type: PasswordlessTokenResponseDto, description: 'token response (aal AAL2); after a passwordless first factor that resumed an authorization request, also its `oauth_params`' })
  @ApiProblems(...Problems.input, ...Problems.apiKey, 'mfa/invalid_challenge', 'mfa/invalid_code', 'auth/login_throttled', ...Problems.rateLimited)
  verify(@Body() body: MfaVerifyLoginRequestDto, @CurrentApiKey() key: ApiKeyPrincipal, @ClientInfo() client: ClientInfoValue): Promise<TokenResponse> {
    return this.commandBus.execute(new VerifyMfaLoginCommand(key, body.mfa_challenge_token, body.code, client));
  }

  @Post('mfa/disable')
  @HttpCode(204)
  @RateLimit(PASSWORD_PROOF_PER_IP)
  @RequireStepUp(MFA_DISABLE_STEP_UP_MAX_AGE)
  @ApiOperation({ summary: 'Disable TOTP: a step-up no older than 5 minutes, the password and a TOTP or recovery code' })
  @ApiNoContentResponse({ description: 'MFA is disabled' })
  @ApiProblems(...Problems.input, ...Problems.bearer, 'auth/invalid_credentials', 'mfa/invalid_code', 'auth/forbidden', 'mfa/not_enabled', 'auth/login_throttled', 'auth/step_up_required', ...Problems.rateLimited)
  async disable(@CurrentUser() user: UserPrincipal, @Body() body: MfaDisableRequestDto, @ClientInfo() client: ClientInfoValue): Promise<void> {
    await this.commandBus.execute(new DisableMfaCommand(user, body.code, body.password, client));
  }

  @Post('mfa/recovery-codes')
  @RateLimit(PASSWORD_PROOF_PER_IP)
  @HttpCode(200)
  @BearerAuth()
  @ApiOperation({ summary: 'Replace the recovery codes (password and a TOTP code); the old ones stop working' })
  @ApiResponse({ status: 200, type: RecoveryCodesResponseDto })
  @ApiProblems(...Problems.input, ...Problems.bearer, 'auth/invalid_credentials', 'mfa/invalid_code', 'auth/forbidden', 'mfa/not_enabled', 'auth/login_throttled', ...Problems.rateLimited)
  regenerate(@CurrentUser() user: UserPrincipal, @Body() body: MfaRegenerateCodesRequestDto, @ClientInfo() client: ClientInfoValue): Promise<RecoveryCodesResponseDto> {
    return this.commandBus.execute(new RegenerateRecoveryCodesCommand(user, body.code, body.password, client));
  }

  @Post('step-up/password')
  @HttpCode(200)
  @RateLimit(PASSWORD_PROOF_PER_IP)
  @BearerAuth()
  @ApiOperation({ summary: 'Step-up by password (spec 2.5): a fresh access token with step_up_at and pwd in amr' })
  @ApiResponse({ status: 200, type: StepUpResponseDto })
  @ApiProblems(...Problems.input, ...Problems.bearer, 'auth/invalid_credentials', 'auth/forbidden', 'mfa/enrollment_required', 'auth/login_throttled', ...Problems.rateLimited)
  stepUpPassword(@CurrentUser() user: UserPrincipal, @Body() body: StepUpPasswordRequestDto, @ClientInfo() client: ClientInfoValue): Promise<StepUpResponseDto> {
    return this.commandBus.execute(new StepUpPasswordCommand(user, body.password, client));
  }
}
