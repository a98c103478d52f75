import { Body, Controller, HttpCode, Post } from '@nestjs/common';
import { CommandBus } from '@nestjs/cqrs';
import { ApiAcceptedResponse, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { ClientInfo, ClientInfoValue, CurrentUser, UserPrincipal } from '../../../shared/auth/auth-context';
import { BearerAuth } from '../../../shared/auth/guards';
import { ApiProblems, Problems } from '../../../shared/http/api-docs';
import { RateLimit } from '../../../shared/rate-limit/rate-limit.decorator';
import { VERIFY_PER_IP } from '../../../shared/rate-limit/mail-limits.service';
import { CompleteStepUpCommand, InitiateStepUpCommand } from './step-up.commands';
import {
  StepUpEmailOtpInitiateRequestDto,
  StepUpEmailOtpVerifyRequestDto,
  StepUpInitiatedResponse,
  StepUpMagicLinkInitiateRequestDto,
  StepUpMagicLinkVerifyRequestDto,
} from './step-up.request.dto';
import { StepUpResponseDto as StepUpResponse } from '../../mfa/mfa.response.dto';

/** spec 2.5 step-up by magic link and email code (the password variant lives in the MFA module). */
@ApiTags('step-up')
@Controller('v1/auth/step-up')
export class StepUpController {
  constructor(private readonly commandBus: CommandBus) {}

  @Post('magic-link')
  @HttpCode(202)
  @BearerAuth()
  @ApiAcceptedResponse({ type: StepUpInitiatedResponse })
  @ApiOperation({ summary: "Mail a step-up link (15 minutes) for this session to the account's address" })
  @ApiProblems(...Problems.input, ...Problems.bearer, 'auth/forbidden', ...Problems.rateLimited, 'magic_link/disabled')
  magicLink(@CurrentUser() user: UserPrincipal, @Body() body: StepUpMagicLinkInitiateRequestDto, @ClientInfo() client: ClientInfoValue): Promise<StepUpInitiatedResponse> {
    return this.commandBus.execute(new InitiateStepUpCommand('magic_link', user, body.action_hint, client));
  }

  @Post('magic-link/verify')
  @HttpCode(200)
  @BearerAuth()
  @RateLimit(VERIFY_PER_IP)
  @ApiOkResponse({ type: StepUpResponse })
  @ApiOperation({ summary: 'Complete the step-up with the link token: a fresh access token (amr + "email", step_up_at)' })
  @ApiProblems(...Problems.input, 'token/invalid', ...Problems.bearer, 'auth/forbidden', 'mfa/enrollment_required', ...Problems.rateLimited, 'magic_link/disabled')
  verifyMagicLink(@CurrentUser() user: UserPrincipal, @Body() body: StepUpMagicLinkVerifyRequestDto, @ClientInfo() client: ClientInfoValue): Promise<StepUpResponse> {
    return this.commandBus.execute(new CompleteStepUpCommand('magic_link', user, body.token, client));
  }

  @Post('email-otp')
  @HttpCode(202)
  @BearerAuth()
  @ApiAcceptedResponse({ type: StepUpInitiatedResponse })
  @ApiOperation({ summary: "Mail a 6-digit step-up code (10 minutes, 5 attempts) for this session to the account's address" })
  @ApiProblems(...Problems.input, ...Problems.bearer, 'auth/forbidden', ...Problems.rateLimited, 'email_otp/disabled')
  emailOtp(@CurrentUser() user: UserPrincipal, @Body() body: StepUpEmailOtpInitiateRequestDto, @ClientInfo() client: ClientInfoValue): Promise<StepUpInitiatedResponse> {
    return this.commandBus.execute(new InitiateStepUpCommand('email_otp', user, body.action_hint, client));
  }

  @Post('email-otp/verify')
  @HttpCode(200)
  @BearerAuth()
  @RateLimit(VERIFY_PER_IP)
  @ApiOkResponse({ type: StepUpResponse })
  @ApiOperation({ summary: 'Complete the step-up with the code: a fresh access token (amr + "otp", step_up_at)' })
  @ApiProblems(...Problems.input, ...Problems.bearer, 'otp/invalid', 'auth/forbidden', 'mfa/enrollment_required', 'auth/login_throttled', ...Problems.rateLimited, 'email_otp/disabled')
  verifyEmailOtp(@CurrentUser() user: UserPrincipal, @Body() body: StepUpEmailOtpVerifyRequestDto, @ClientInfo() client: ClientInfoValue): Promise<StepUpResponse> {
    return this.commandBus.execute(new CompleteStepUpCommand('email_otp', user, body.otp, client));
  }
}
