import { Body, Controller, HttpCode, Post } from '@nestjs/common';
import { CommandBus } from '@nestjs/cqrs';
import { ApiAcceptedResponse, ApiNoContentResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { ClientInfo, ClientInfoValue } from '../../../shared/auth/auth-context';
import { ApiProblems, Problems } from '../../../shared/http/api-docs';
import { RateLimit } from '../../../shared/rate-limit/rate-limit.decorator';
import { UniformLatency } from '../../../shared/http/uniform-latency';
import { AcceptedResponse } from '../../account-security/account-security.constants';
import { VERIFY_PER_IP } from '../../../shared/rate-limit/mail-limits.service';
import { DashboardForgotPasswordRequestDto, DashboardResetPasswordRequestDto } from './dashboard-password.dto';
import { DashboardForgotPasswordCommand, DashboardResetPasswordCommand } from './dashboard-password.handlers';

/** Password reset of dashboard accounts (tenant administrators), as end users have it. */
@ApiTags('dashboard')
@Controller('v1/auth/dashboard/password')
export class DashboardPasswordController {
  constructor(private readonly commandBus: CommandBus) {}

  @Post('forgot')
  @HttpCode(202)
  @UniformLatency()
  @ApiAcceptedResponse({ type: AcceptedResponse })
  @ApiOperation({
    summary: 'Mail a dashboard password reset link (30 minutes, single use)',
    description:
      'The same 202 body, after the same time (ENUMERATION_SAFE_MIN_RESPONSE_MS), whether or not the address has a dashboard account. Limited per client address (RATE_LIMIT_EMAIL_PER_IP) and per address ' +
      '(RATE_LIMIT_EMAIL_PER_ADDRESS) in RATE_LIMIT_EMAIL_WINDOW_SECONDS: 429 rate_limit/exceeded with Retry-After. The link is ' +
      '`{ACCOUNTS_URL}/dashboard/reset-password?token=<token>`.',
  })
  @ApiProblems(...Problems.input, ...Problems.rateLimited)
  forgot(@Body() body: DashboardForgotPasswordRequestDto, @ClientInfo() client: ClientInfoValue): Promise<AcceptedResponse> {
    return this.commandBus.execute(new DashboardForgotPasswordCommand(body.email, client));
  }

  @Post('reset')
  @HttpCode(204)
  @RateLimit(VERIFY_PER_IP)
  @ApiOperation({ summary: 'Set a new dashboard password with the reset link; ends every dashboard session of the account and mails it' })
  @ApiNoContentResponse({ description: 'the password is changed' })
  @ApiProblems(...Problems.input, 'token/invalid', ...Problems.rateLimited)
  async reset(@Body() body: DashboardResetPasswordRequestDto, @ClientInfo() client: ClientInfoValue): Promise<void> {
    await this.commandBus.execute(new DashboardResetPasswordCommand(body.token, body.password, client));
  }
}
