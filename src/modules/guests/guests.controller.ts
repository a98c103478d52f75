import { Body, Controller, Get, Headers, HttpCode, Patch, Post } from '@nestjs/common';
import { CommandBus, QueryBus } from '@nestjs/cqrs';
import { ApiCreatedResponse, ApiHeader, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { ApiKeyPrincipal, CurrentApiKey, CurrentDashboard, DashboardPrincipal } from '../../shared/auth/auth-context';
import { DashboardAuth } from '../../shared/auth/dashboard.guard';
import { ApiKeyAuth } from '../../shared/auth/guards';
import { ApiProblems, Problems } from '../../shared/http/api-docs';
import { RateLimit } from '../../shared/rate-limit/rate-limit.decorator';
import { AnonymousSigninCommand } from './anonymous-signin/anonymous-signin.command';
import { AnonymousSigninRequestDto, AnonymousSigninResponse } from './anonymous-signin/anonymous-signin.request.dto';
import { AnonymousSettingsResponseDto, AnonymousSigninResponseDto } from './guests.response.dto';
import { AnonymousSettingsResponse, UpdateAnonymousSettingsDto } from './settings/anonymous-settings.dto';
import { GetAnonymousSettingsQuery, UpdateAnonymousSettingsCommand } from './settings/anonymous-settings.handlers';

@ApiTags('guests')
@Controller()
export class GuestsController {
  constructor(
    private readonly commandBus: CommandBus,
    private readonly queryBus: QueryBus,
  ) {}

  @Post('v1/auth/anonymous')
  @HttpCode(201)
  @ApiKeyAuth()
  // spec 8: the per-address limit first; the per-key hourly allowance (the key ships in client
  // apps) counts only requests that address let through and whose body is valid, so one address
  // cannot use up every guest's allowance
  @RateLimit(
    { bucket: 'anon-ip', by: 'ip', limit: (c) => c.RATE_LIMIT_ANONYMOUS_PER_IP_PER_MIN, windowSeconds: 60, code: 'anonymous/rate_limited' },
    { bucket: 'anon-key', by: 'api_key', limit: (c) => c.RATE_LIMIT_ANONYMOUS_PER_KEY_PER_HOUR, windowSeconds: 3600, code: 'anonymous/rate_limited', validBodyOnly: true },
  )
  @ApiOperation({ summary: 'Guest sign-in (spec 2.3): an opaque user id, is_anonymous true, aal AAL1' })
  @ApiCreatedResponse({ type: AnonymousSigninResponseDto, description: 'a guest and its tokens (exactly the fields of spec 2.3)' })
  @ApiProblems(...Problems.input, ...Problems.apiKey, 'anonymous/disabled', 'anonymous/mau_exhausted', 'anonymous/rate_limited', 'server/unavailable')
  anonymous(@CurrentApiKey() key: ApiKeyPrincipal, @Body() body: AnonymousSigninRequestDto): Promise<AnonymousSigninResponse> {
    return this.commandBus.execute(new AnonymousSigninCommand(key, body.public_metadata ?? {}));
  }

  @Get('v1/auth/dashboard/tenants/:slug/settings/anonymous')
  @DashboardAuth({ tenant: true })
  @ApiOperation({ summary: 'Guest sign-in settings of the tenant' })
  @ApiOkResponse({ type: AnonymousSettingsResponseDto })
  @ApiProblems(...Problems.dashboardRead, ...Problems.tenant)
  getSettings(@CurrentDashboard() s: DashboardPrincipal): Promise<AnonymousSettingsResponse> {
    return this.queryBus.execute(new GetAnonymousSettingsQuery(s.tenant!.id));
  }

  @Patch('v1/auth/dashboard/tenants/:slug/settings/anonymous')
  @DashboardAuth({ tenant: true, owner: true, reauth: true })
  @ApiHeader({ name: 'X-Service-Confirm', required: false, description: 'privileged-default-role: confirms giving guests a role broader than read_only (see the description)' })
  @ApiOperation({
    summary: 'Update guest sign-in settings (owner)',
    description:
      'Guests get the tenant\'s current default_user_role, existing guests on their next refresh too (also while sign-ins are disabled). ' +
      'A change that gives guests (new ones, or existing ones once guests have ever been enabled) a role broader than read_only and broader than ' +
      'the role they hold now needs `X-Service-Confirm: privileged-default-role` (else 409 anonymous/confirmation_required): the first enabling with ' +
      'such a role, widening it while enabled, and widening it while disabled. Disabling, narrowing, re-enabling with the role guests already hold ' +
      'and changing the retention need no confirmation.',
  })
  @ApiOkResponse({ type: AnonymousSettingsResponseDto, description: 'the settings after the update' })
  @ApiProblems('auth/reauth_required', ...Problems.dashboardWrite, ...Problems.input, ...Problems.tenant, ...Problems.owner, 'anonymous/confirmation_required')
  patchSettings(
    @CurrentDashboard() s: DashboardPrincipal,
    @Body() body: UpdateAnonymousSettingsDto,
    @Headers('x-service-confirm') confirm: string | undefined,
  ): Promise<AnonymousSettingsResponse> {
    return this.commandBus.execute(new UpdateAnonymousSettingsCommand(s, body, confirm));
  }
}
