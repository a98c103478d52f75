import { Body, Controller, HttpCode, Post } from '@nestjs/common';
import { CommandBus } from '@nestjs/cqrs';
import { ApiAcceptedResponse, ApiExtraModels, ApiNoContentResponse, ApiOkResponse, ApiOperation, ApiTags, getSchemaPath } from '@nestjs/swagger';
import { ApiKeyPrincipal, ClientInfo, ClientInfoValue, CurrentApiKey, CurrentUser, UserPrincipal } from '../../shared/auth/auth-context';
import { ApiKeyAuth, BearerAuth } from '../../shared/auth/guards';
import { ApiProblems, Problems } from '../../shared/http/api-docs';
import { PASSWORD_PROOF_PER_IP, RateLimit } from '../../shared/rate-limit/rate-limit.decorator';
import { UniformLatency } from '../../shared/http/uniform-latency';
import { MfaRequiredResponseDto } from '../users/users.response.dto';
import { PasswordlessTokenResponseDto } from '../sessions/sessions.response.dto';
import { AcceptedResponse } from './account-security.constants';
import { RequestEmailOtpCommand, VerifyEmailOtpCommand } from './email-otp/email-otp.commands';
import { UserEmailOtpRequestDto, UserEmailOtpVerifyRequestDto } from './email-otp/email-otp.request.dto';
import { ResendVerificationCommand, VerifyEmailCommand } from './email-verification/verify-email.command';
import { ResendVerificationRequestDto, VerifyEmailRequestDto } from './email-verification/verify-email.request.dto';
import { RequestMagicLinkCommand, VerifyMagicLinkCommand } from './magic-link/magic-link.commands';
import { UserMagicLinkRequestDto, UserMagicLinkVerifyRequestDto } from './magic-link/magic-link.request.dto';
import { VERIFY_PER_IP } from '../../shared/rate-limit/mail-limits.service';
import { PasswordlessResponse } from './passwordless-sign-in.service';
import { ChangePasswordCommand, ForgotPasswordCommand, ResetPasswordCommand } from './password/password.commands';
import { ChangePasswordRequestDto, ForgotPasswordRequestDto, ResetPasswordRequestDto } from './password/password.request.dto';

/** A passwordless sign-in answers a token response (with the resumed oauth_params) or an MFA challenge. */
const PasswordlessOk = () =>
  ApiOkResponse({
    description: 'a token response (with the oauth_params of the request, if any), or `{mfa_required: true, mfa_challenge_token}`',
    schema: { oneOf: [{ $ref: getSchemaPath(PasswordlessTokenResponseDto) }, { $ref: getSchemaPath(MfaRequiredResponseDto) }] },
  });

const ENUMERATION_SAFE = '202 with the same body, after the same time (ENUMERATION_SAFE_MIN_RESPONSE_MS), whether or not the address has an account; limited per address and per client address (429 + Retry-After)';

/** Contract "Account security flows": the tenant comes from X-API-Key (password change: the bearer). */
@ApiTags('account security')
@Controller('v1/auth')
@ApiExtraModels(PasswordlessTokenResponseDto, MfaRequiredResponseDto)
export class AccountSecurityController {
  constructor(private readonly commandBus: CommandBus) {}

  @Post('verify-email')
  @HttpCode(204)
  @ApiKeyAuth()
  @RateLimit(VERIFY_PER_IP)
  @ApiOperation({ summary: 'Verify the email address with the token of the verification link (single use)' })
  @ApiNoContentResponse({ description: 'the address is verified' })
  @ApiProblems(...Problems.input, 'token/invalid', ...Problems.apiKey, ...Problems.rateLimited)
  async verifyEmail(@CurrentApiKey() key: ApiKeyPrincipal, @Body() body: VerifyEmailRequestDto): Promise<void> {
    await this.commandBus.execute(new VerifyEmailCommand(key, body.token));
  }

  @Post('verify-email/resend')
  @HttpCode(202)
  @ApiKeyAuth()
  @UniformLatency()
  @ApiAcceptedResponse({ type: AcceptedResponse })
  @ApiOperation({ summary: 'Send a new verification link to an unverified address', description: ENUMERATION_SAFE })
  @ApiProblems(...Problems.input, ...Problems.apiKey, ...Problems.rateLimited)
  resendVerification(@CurrentApiKey() key: ApiKeyPrincipal, @Body() body: ResendVerificationRequestDto, @ClientInfo() client: ClientInfoValue): Promise<AcceptedResponse> {
    return this.commandBus.execute(new ResendVerificationCommand(key, body.email, client));
  }

  @Post('password/forgot')
  @HttpCode(202)
  @ApiKeyAuth()
  @UniformLatency()
  @ApiAcceptedResponse({ type: AcceptedResponse })
  @ApiOperation({ summary: 'Mail a password reset link (30 minutes, single use)', description: ENUMERATION_SAFE })
  @ApiProblems(...Problems.input, ...Problems.apiKey, ...Problems.rateLimited)
  forgot(@CurrentApiKey() key: ApiKeyPrincipal, @Body() body: ForgotPasswordRequestDto, @ClientInfo() client: ClientInfoValue): Promise<AcceptedResponse> {
    return this.commandBus.execute(new ForgotPasswordCommand(key, body.email, client));
  }

  @Post('password/reset')
  @HttpCode(204)
  @ApiKeyAuth()
  @RateLimit(VERIFY_PER_IP)
  @ApiOperation({ summary: 'Set a new password with the reset link; ends every session of the user and mails them' })
  @ApiNoContentResponse({ description: 'the password is changed' })
  @ApiProblems(...Problems.input, 'token/invalid', ...Problems.apiKey, ...Problems.rateLimited)
  async reset(@CurrentApiKey() key: ApiKeyPrincipal, @Body() body: ResetPasswordRequestDto, @ClientInfo() client: ClientInfoValue): Promise<void> {
    await this.commandBus.execute(new ResetPasswordCommand(key, body.token, body.password, client));
  }

  @Post('password/change')
  @HttpCode(204)
  @BearerAuth()
  @RateLimit(PASSWORD_PROOF_PER_IP)
  @ApiOperation({ summary: 'Change the password (current password required; a wrong one is 401 and throttled); ends the other sessions' })
  @ApiNoContentResponse({ description: 'the password is changed' })
  @ApiProblems(...Problems.input, ...Problems.bearer, 'auth/invalid_credentials', 'auth/forbidden', 'auth/login_throttled', ...Problems.rateLimited)
  async change(@CurrentUser() user: UserPrincipal, @Body() body: ChangePasswordRequestDto, @ClientInfo() client: ClientInfoValue): Promise<void> {
    await this.commandBus.execute(new ChangePasswordCommand(user, body.current_password, body.new_password, client));
  }

  @Post('magic-link')
  @HttpCode(202)
  @ApiKeyAuth()
  @UniformLatency()
  @ApiAcceptedResponse({ type: AcceptedResponse })
  @ApiOperation({
    summary: 'Mail a sign-in link (15 minutes, single use) to an existing account; 403 magic_link/disabled until the tenant enables it',
    description: `${ENUMERATION_SAFE}. With oauth_params, a redirect_uri not registered for the client is 400 and nothing is sent.`,
  })
  @ApiProblems(...Problems.input, 'oauth_params/invalid_redirect_uri', ...Problems.apiKey, 'magic_link/disabled', ...Problems.rateLimited)
  magicLink(@CurrentApiKey() key: ApiKeyPrincipal, @Body() body: UserMagicLinkRequestDto, @ClientInfo() client: ClientInfoValue): Promise<AcceptedResponse> {
    return this.commandBus.execute(new RequestMagicLinkCommand(key, body, client));
  }

  @Post('magic-link/verify')
  @HttpCode(200)
  @ApiKeyAuth()
  @RateLimit(VERIFY_PER_IP)
  @ApiOperation({ summary: 'Sign in with a magic link: token response (amr ["email"], email_verified true), or an MFA challenge' })
  @PasswordlessOk()
  @ApiProblems(...Problems.input, 'token/invalid', 'auth/resume_binding_mismatch', ...Problems.apiKey, 'magic_link/disabled', 'mfa/enrollment_required', ...Problems.rateLimited)
  verifyMagicLink(@CurrentApiKey() key: ApiKeyPrincipal, @Body() body: UserMagicLinkVerifyRequestDto): Promise<PasswordlessResponse> {
    return this.commandBus.execute(new VerifyMagicLinkCommand(key, body.token, body.resume_binding));
  }

  @Post('email-otp')
  @HttpCode(202)
  @ApiKeyAuth()
  @UniformLatency()
  @ApiAcceptedResponse({ type: AcceptedResponse })
  @ApiOperation({
    summary: 'Mail a 6-digit sign-in code (10 minutes, 5 attempts); 403 email_otp/disabled until the tenant enables it',
    description: `${ENUMERATION_SAFE}. mode login sends nothing to an unknown address; login_or_create applies the tenant's address policy (422 email/*).`,
  })
  @ApiProblems(...Problems.input, 'captcha/failed', 'oauth_params/invalid_redirect_uri', ...Problems.apiKey, 'email_otp/disabled', ...Problems.emailPolicy, ...Problems.rateLimited)
  emailOtp(@CurrentApiKey() key: ApiKeyPrincipal, @Body() body: UserEmailOtpRequestDto, @ClientInfo() client: ClientInfoValue): Promise<AcceptedResponse> {
    return this.commandBus.execute(new RequestEmailOtpCommand(key, body, client));
  }

  @Post('email-otp/verify')
  @HttpCode(200)
  @ApiKeyAuth()
  @RateLimit(VERIFY_PER_IP)
  @ApiOperation({ summary: 'Sign in (or sign up, login_or_create) with an email code: token response (amr ["otp"], email_verified true) or an MFA challenge' })
  @PasswordlessOk()
  @ApiProblems(
    ...Problems.input,
    'auth/resume_binding_mismatch',
    ...Problems.apiKey,
    'otp/invalid',
    'auth/login_throttled',
    'email_otp/disabled',
    'mfa/enrollment_required',
    'user/date_of_birth_required',
    ...Problems.emailPolicy,
    ...Problems.rateLimited,
  )
  verifyEmailOtp(@CurrentApiKey() key: ApiKeyPrincipal, @Body() body: UserEmailOtpVerifyRequestDto, @ClientInfo() client: ClientInfoValue): Promise<PasswordlessResponse> {
    return this.commandBus.execute(new VerifyEmailOtpCommand(key, body, client));
  }
}
