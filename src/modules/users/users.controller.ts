import { Body, Controller, Get, HttpCode, Post, UseGuards } from '@nestjs/common';
import { CommandBus, QueryBus } from '@nestjs/cqrs';
import { ApiBearerAuth, ApiOperation, ApiSecurity, ApiTags } from '@nestjs/swagger';
import {
  ApiKeyPrincipal,
  ClientInfo,
  ClientInfoValue,
  CurrentApiKey,
  CurrentUser,
  UserPrincipal,
} from '../../shared/auth/auth-context';
import { ApiKeyAuth, BearerAuth } from '../../shared/auth/guards';
import { RateLimit } from '../../shared/rate-limit/rate-limit.decorator';
import { TokenResponse } from '../sessions/sessions.service';
import { LoginRequestDto } from './login/login.request.dto';
import { LoginUserCommand, MfaRequiredResponse } from './login/login-user.command';
import { LogoutCommand } from './logout/logout.command';
import { GetMeQuery, MeResponse } from './me/get-me.query';
import { RegisterAuthGuard } from './register/register-auth.guard';
import { RegisterRequestDto } from './register/register.request.dto';
import { RegisterUserCommand } from './register/register-user.command';

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
  @ApiBearerAuth()
  @RateLimit({ bucket: 'register', by: 'ip', limit: (c) => c.RATE_LIMIT_REGISTER_PER_MIN, windowSeconds: 60 })
  @ApiOperation({ summary: 'Register an end user; with a guest bearer, claim that guest (same user id)' })
  register(
    @Body() body: RegisterRequestDto,
    @CurrentApiKey() key: ApiKeyPrincipal | undefined,
    @CurrentUser() user: UserPrincipal | undefined,
    @ClientInfo() client: ClientInfoValue,
  ): Promise<TokenResponse> {
    const tenantId = key?.tenantId ?? user!.tenantId;
    return this.commandBus.execute(new RegisterUserCommand(tenantId, key, body, user, client));
  }

  @Post('login')
  @HttpCode(200)
  @ApiKeyAuth()
  @ApiOperation({ summary: 'Password sign-in; answers an MFA challenge when MFA applies' })
  login(@Body() body: LoginRequestDto, @CurrentApiKey() key: ApiKeyPrincipal, @ClientInfo() client: ClientInfoValue): Promise<TokenResponse | MfaRequiredResponse> {
    return this.commandBus.execute(new LoginUserCommand(key, body.email, body.password, client));
  }

  @Post('logout')
  @HttpCode(204)
  @BearerAuth()
  @ApiOperation({ summary: 'End the current session' })
  async logout(@CurrentUser() user: UserPrincipal): Promise<void> {
    await this.commandBus.execute(new LogoutCommand(user));
  }

  @Get('me')
  @BearerAuth()
  @ApiOperation({ summary: 'The current user' })
  me(@CurrentUser() user: UserPrincipal): Promise<MeResponse> {
    return this.queryBus.execute(new GetMeQuery(user.tenantId, user.userId, user.claims.role));
  }
}
