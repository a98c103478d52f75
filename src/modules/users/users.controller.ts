import { Body, Controller, Get, HttpCode, Post, Query, UseGuards } from '@nestjs/common';
import { CommandBus, QueryBus } from '@nestjs/cqrs';
import { ApiCreatedResponse, ApiExtraModels, ApiNoContentResponse, ApiOkResponse, ApiOperation, ApiSecurity, ApiTags, getSchemaPath } from '@nestjs/swagger';
import {
  ApiKeyPrincipal,
  ClientInfo,
  ClientInfoValue,
  CurrentApiKey,
  CurrentUser,
  UserPrincipal,
} from '../../shared/auth/auth-context';
import { BearerPrefetch, BearerPrefetched, Prefetched } from '../../shared/auth/bearer-prefetch';
import { ApiKeyAuth, BearerAuth } from '../../shared/auth/guards';
import { UserProfileCache } from '../../shared/cache/user-profile.cache';
import { ApiProblems, Problems } from '../../shared/http/api-docs';
import { RateLimit } from '../../shared/rate-limit/rate-limit.decorator';
import { TokenResponseDto } from '../sessions/sessions.response.dto';
import { TokenResponse } from '../sessions/sessions.service';
import { LoginRequestDto } from './login/login.request.dto';
import { LoginUserCommand, MfaRequiredResponse } from './login/login-user.command';
import { LogoutCommand } from './logout/logout.command';
import { LogoutQueryDto } from './logout/logout.request.dto';
import { GetMeQuery, MeResponse } from './me/get-me.query';
import { RegisterAuthGuard } from './register/register-auth.guard';
import { RegisterRequestDto } from './register/register.request.dto';
import { RegisterUserCommand } from './register/register-user.command';
import { MeResponseDto, MfaRequiredResponseDto } from './users.response.dto';

@ApiTags('end users')
@Controller('v1/auth')
export class UsersController {
  constructor(
    private readonly commandBus: CommandBus,
    private readonly queryBus: QueryBus,
  ) {}

  @Post('register')
  @HttpCode(201)
  @UseGuards(RegisterAuthGuard)
  @ApiSecurity('api_key')
  @ApiSecurity({ api_key: [], bearer: [] })
  @RateLimit({ bucket: 'register', by: 'ip', limit: (c) => c.RATE_LIMIT_REGISTER_PER_MIN, windowSeconds: 60 })
  @ApiOperation({
    summary: 'Register an end user; with a guest bearer, claim that guest (same user id)',
    description: 'The tenant comes from X-API-Key, required also when claiming; a guest bearer token sent with it must be of the same tenant (else 401 auth/tenant_mismatch).',
  })
  @ApiCreatedResponse({ type: TokenResponseDto, description: 'token response of the new (or claimed) user' })
  @ApiProblems(
    ...Problems.input,
    'user/date_of_birth_required',
    'user/invite_invalid',
    'user/age_verification_invalid',
    ...Problems.apiKey,
    ...Problems.bearer,
    'user/email_exists',
    'anonymous/already_claimed',
    ...Problems.emailPolicy,
    ...Problems.rateLimited,
  )
  register(
    @Body() body: RegisterRequestDto,
    @CurrentApiKey() key: ApiKeyPrincipal,
    @CurrentUser() user: UserPrincipal | undefined,
    @ClientInfo() client: ClientInfoValue,
  ): Promise<TokenResponse> {
    return this.commandBus.execute(new RegisterUserCommand(key, body, user, client));
  }

  @Post('login')
  @HttpCode(200)
  @ApiKeyAuth()
  @RateLimit({ bucket: 'login', by: 'ip', limit: (c) => c.RATE_LIMIT_LOGIN_PER_IP_PER_MIN, windowSeconds: 60 })
  @ApiOperation({ summary: 'Password sign-in; answers an MFA challenge when MFA applies' })
  @ApiExtraModels(TokenResponseDto, MfaRequiredResponseDto)
  @ApiOkResponse({
    description: 'a token response, or `{mfa_required: true, mfa_challenge_token}` (finish with POST /v1/auth/mfa/verify)',
    schema: { oneOf: [{ $ref: getSchemaPath(TokenResponseDto) }, { $ref: getSchemaPath(MfaRequiredResponseDto) }] },
  })
  @ApiProblems(...Problems.input, ...Problems.apiKey, 'auth/invalid_credentials', 'mfa/enrollment_required', 'auth/login_throttled', ...Problems.rateLimited)
  login(@Body() body: LoginRequestDto, @CurrentApiKey() key: ApiKeyPrincipal, @ClientInfo() client: ClientInfoValue): Promise<TokenResponse | MfaRequiredResponse> {
    return this.commandBus.execute(new LoginUserCommand(key, body.email, body.password, client));
  }

  @Post('logout')
  @HttpCode(204)
  @BearerAuth()
  @ApiOperation({
    summary: 'End the current session, or every session of the user (scope=global), or all but this one (scope=others)',
    description: 'Ended sessions: their refresh tokens stop working and their access tokens are refused at once. Agent tokens have no session (403; revoke them at /oauth/revoke).',
  })
  @ApiNoContentResponse({ description: 'the sessions ended (their refresh tokens stop working)' })
  @ApiProblems('request/invalid', ...Problems.bearer, 'auth/forbidden')
  async logout(@CurrentUser() user: UserPrincipal, @Query() query: LogoutQueryDto): Promise<void> {
    await this.commandBus.execute(new LogoutCommand(user, query.scope));
  }

  @Get('me')
  @BearerAuth()
  @BearerPrefetch(UserProfileCache)
  @ApiOperation({ summary: 'The current user' })
  @ApiOkResponse({ type: MeResponseDto })
  @ApiProblems(...Problems.bearer)
  me(@CurrentUser() user: UserPrincipal, @BearerPrefetched() prefetched: Prefetched | undefined): Promise<MeResponse> {
    const delegated = user.claims.act ? String(user.claims.scope ?? '').split(' ').filter(Boolean) : undefined;
    return this.queryBus.execute(new GetMeQuery(user.tenantId, user.userId, user.claims.role, prefetched, delegated));
  }
}
