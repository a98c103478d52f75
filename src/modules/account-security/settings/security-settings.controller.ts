import { Body, Controller, Get, Patch, Put } from '@nestjs/common';
import { CommandBus, QueryBus } from '@nestjs/cqrs';
import { ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { CurrentDashboard, DashboardPrincipal } from '../../../shared/auth/auth-context';
import { DashboardAuth } from '../../../shared/auth/dashboard.guard';
import { ApiProblems, Problems } from '../../../shared/http/api-docs';
import { GetEmailDomainsQuery, PutEmailDomainsCommand } from './email-domains.handlers';
import { EmailDomainsResponse, PutEmailDomainsDto, SecuritySettingsResponse, UpdateSecuritySettingsDto } from './security-settings.dto';
import { GetSecuritySettingsQuery, UpdateSecuritySettingsCommand } from './security-settings.handlers';

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
  @DashboardAuth({ tenant: true, owner: true })
  @ApiOkResponse({ type: SecuritySettingsResponse })
  @ApiOperation({ summary: 'Update security settings (owner; spec 2.8, partial, no extra properties)' })
  @ApiProblems(...Problems.dashboardWrite, ...Problems.input, ...Problems.tenant, ...Problems.owner)
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
  @DashboardAuth({ tenant: true, owner: true })
  @ApiOkResponse({ type: EmailDomainsResponse })
  @ApiOperation({ summary: 'Replace the email domain lists (owner; spec PutEmailDomainsRequest); a domain covers its subdomains' })
  @ApiProblems(...Problems.dashboardWrite, ...Problems.input, ...Problems.tenant, ...Problems.owner)
  putEmailDomains(@CurrentDashboard() s: DashboardPrincipal, @Body() body: PutEmailDomainsDto): Promise<EmailDomainsResponse> {
    return this.commandBus.execute(new PutEmailDomainsCommand(s, body));
  }
}
