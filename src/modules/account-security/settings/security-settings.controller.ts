import { Body, Controller, Get, Patch, Put } from '@nestjs/common';
import { CommandBus, QueryBus } from '@nestjs/cqrs';
import { ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { CurrentDashboard, DashboardPrincipal } from '../../../shared/auth/auth-context';
import { DashboardAuth } from '../../../shared/auth/dashboard.guard';
import { ApiProblems, Problems } from '../../../shared/http/api-docs';
import { GetEmailDomainsQuery, PutEmailDomainsCommand } from './email-domains.handlers';
import { GetPasskeyDomainQuery, PutPasskeyDomainCommand } from './passkey-domain.handlers';
import { EmailDomainsResponse, PasskeyDomainResponse, PutEmailDomainsDto, PutPasskeyDomainDto, PutUserScopesDto, SecuritySettingsResponse, UpdateSecuritySettingsDto, UserScopesResponse } from './security-settings.dto';
import { GetSecuritySettingsQuery, UpdateSecuritySettingsCommand } from './security-settings.handlers';
import { GetUserScopesQuery, PutUserScopesCommand } from './user-scopes.handlers';

/** Contract "Tenant settings": members read, owners write. */
@ApiTags('tenant settings')
@Controller('v1/auth/dashboard/tenants/:slug/settings')
export class SecuritySettingsController {
  constructor(
    private readonly commandBus: CommandBus,
    private readonly queryBus: QueryBus,
  ) {}

  @Get('security')
  @DashboardAuth({ tenant: true })
  @ApiOkResponse({ type: SecuritySettingsResponse })
  @ApiOperation({ summary: 'Security settings of the tenant (spec 2.8); the BYOK auth token only as byok_twilio_auth_token_set' })
  @ApiProblems(...Problems.dashboardRead, ...Problems.tenant)
  getSecurity(@CurrentDashboard() s: DashboardPrincipal): Promise<SecuritySettingsResponse> {
    return this.queryBus.execute(new GetSecuritySettingsQuery(s.tenant!.id));
  }

  @Patch('security')
  @DashboardAuth({ tenant: true, owner: true, reauth: true })
  @ApiOkResponse({ type: SecuritySettingsResponse })
  @ApiOperation({ summary: 'Update security settings (owner; spec 2.8, partial, no extra properties)' })
  @ApiProblems('auth/reauth_required', ...Problems.dashboardWrite, ...Problems.input, ...Problems.tenant, ...Problems.owner)
  patchSecurity(@CurrentDashboard() s: DashboardPrincipal, @Body() body: UpdateSecuritySettingsDto): Promise<SecuritySettingsResponse> {
    return this.commandBus.execute(new UpdateSecuritySettingsCommand(s, body));
  }

  @Get('email-domains')
  @DashboardAuth({ tenant: true })
  @ApiOkResponse({ type: EmailDomainsResponse })
  @ApiOperation({ summary: 'Email domain allowlist and blocklist of the tenant' })
  @ApiProblems(...Problems.dashboardRead, ...Problems.tenant)
  getEmailDomains(@CurrentDashboard() s: DashboardPrincipal): Promise<EmailDomainsResponse> {
    return this.queryBus.execute(new GetEmailDomainsQuery(s.tenant!.id));
  }

  @Put('email-domains')
  @DashboardAuth({ tenant: true, owner: true, reauth: true })
  @ApiOkResponse({ type: EmailDomainsResponse })
  @ApiOperation({ summary: 'Replace the email domain lists (owner; spec PutEmailDomainsRequest); a domain covers its subdomains' })
  @ApiProblems('auth/reauth_required', ...Problems.dashboardWrite, ...Problems.input, ...Problems.tenant, ...Problems.owner)
  putEmailDomains(@CurrentDashboard() s: DashboardPrincipal, @Body() body: PutEmailDomainsDto): Promise<EmailDomainsResponse> {
    return this.commandBus.execute(new PutEmailDomainsCommand(s, body));
  }

  @Get('passkey-domain')
  @DashboardAuth({ tenant: true })
  @ApiOkResponse({ type: PasskeyDomainResponse })
  @ApiOperation({ summary: 'WebAuthn relying-party id of the tenant (spec UpdateTenantPasskeyDomainRequest), and the one in effect' })
  @ApiProblems(...Problems.dashboardRead, ...Problems.tenant)
  getPasskeyDomain(@CurrentDashboard() s: DashboardPrincipal): Promise<PasskeyDomainResponse> {
    return this.queryBus.execute(new GetPasskeyDomainQuery(s.tenant!.id));
  }

  @Put('passkey-domain')
  @DashboardAuth({ tenant: true, owner: true, reauth: true })
  @ApiOkResponse({ type: PasskeyDomainResponse })
  @ApiOperation({ summary: 'Set or clear (null) the relying-party id (owner): a registrable domain or a name under one, never a public suffix or an IP address' })
  @ApiProblems('auth/reauth_required', ...Problems.dashboardWrite, ...Problems.input, ...Problems.tenant, ...Problems.owner)
  putPasskeyDomain(@CurrentDashboard() s: DashboardPrincipal, @Body() body: PutPasskeyDomainDto): Promise<PasskeyDomainResponse> {
    return this.commandBus.execute(new PutPasskeyDomainCommand(s, body));
  }

  @Get('scopes')
  @DashboardAuth({ tenant: true })
  @ApiOkResponse({ type: UserScopesResponse })
  @ApiOperation({ summary: 'Scopes of the tenant\'s user access tokens (contract "Tokens": user_scopes, default openid profile email)' })
  @ApiProblems(...Problems.dashboardRead, ...Problems.tenant)
  getUserScopes(@CurrentDashboard() s: DashboardPrincipal): Promise<UserScopesResponse> {
    return this.queryBus.execute(new GetUserScopesQuery(s.tenant!.id));
  }

  @Put('scopes')
  @DashboardAuth({ tenant: true, owner: true, reauth: true })
  @ApiOkResponse({ type: UserScopesResponse })
  @ApiOperation({
    summary: 'Set the scopes of the tenant\'s user access tokens (owner): the default openid profile email and the tenant\'s own scope names',
    description: 'Tokens signed from now on carry them: new sign-ins and every session\'s next refresh. Token exchange grants an agent requested ∩ the user token\'s scope ∩ the agent\'s allowlist, so a tenant scope reaches agents only once it is here.',
  })
  @ApiProblems('auth/reauth_required', ...Problems.dashboardWrite, ...Problems.input, ...Problems.tenant, ...Problems.owner)
  putUserScopes(@CurrentDashboard() s: DashboardPrincipal, @Body() body: PutUserScopesDto): Promise<UserScopesResponse> {
    return this.commandBus.execute(new PutUserScopesCommand(s, body));
  }
}
