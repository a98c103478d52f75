import { Body, Controller, HttpCode, Post } from '@nestjs/common';
import { CommandBus } from '@nestjs/cqrs';
import { ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { ApiKeyPrincipal, CurrentApiKey } from '../../shared/auth/auth-context';
import { ApiKeyAuth } from '../../shared/auth/guards';
import { ApiProblems, Problems } from '../../shared/http/api-docs';
import { RateLimit } from '../../shared/rate-limit/rate-limit.decorator';
import { RefreshSessionCommand } from './refresh/refresh-session.command';
import { RefreshTokenRequestDto } from './refresh/refresh-token.request.dto';
import { TokenResponseDto } from './sessions.response.dto';
import { TokenResponse } from './sessions.service';

@ApiTags('end users')
@Controller('v1/auth')
export class SessionsController {
  constructor(private readonly commandBus: CommandBus) {}

  @Post('refresh')
  @HttpCode(200)
  @ApiKeyAuth()
  @RateLimit({ bucket: 'refresh', by: 'ip', limit: (c) => c.RATE_LIMIT_REFRESH_PER_IP_PER_MIN, windowSeconds: 60 })
  @ApiOperation({
    summary: 'Rotate a refresh token (reuse of a rotated token ends the session)',
    description: 'Under a tenant MFA policy of `required`, a user without MFA past the grace period gets 403 `mfa/enrollment_required` with an `enrollment_token` (the refresh token is not rotated). That token records the session\'s sign-in: it starts TOTP enrollment only while that sign-in is at most its lifetime old; otherwise the user signs in with the password again (POST /v1/auth/login answers a fresh one).',
  })
  @ApiOkResponse({ type: TokenResponseDto, description: 'a new token pair of the same session (the presented refresh token is rotated)' })
  @ApiProblems(...Problems.input, ...Problems.apiKey, 'auth/invalid_refresh_token', 'mfa/enrollment_required', ...Problems.rateLimited)
  refresh(@CurrentApiKey() key: ApiKeyPrincipal, @Body() body: RefreshTokenRequestDto): Promise<TokenResponse> {
    return this.commandBus.execute(new RefreshSessionCommand(key.tenantId, body.refresh_token));
  }
}
