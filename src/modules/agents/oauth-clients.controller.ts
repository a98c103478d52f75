import { Body, Controller, Get, HttpCode, Post, Query, UseGuards } from '@nestjs/common';
import { CommandBus, QueryBus } from '@nestjs/cqrs';
import { ApiCreatedResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { CurrentDashboard, DashboardPrincipal } from '../../shared/auth/auth-context';
import { DashboardAuth } from '../../shared/auth/dashboard.guard';
import { Page } from '../../shared/db/pagination';
import { ApiPageResponse, ApiProblems, Problems } from '../../shared/http/api-docs';
import { CreatedOAuthClientResponse, CreateOAuthClientRequestDto, ListOAuthClientsRequestDto, OAuthClientResponse } from './oauth-clients/oauth-clients.dto';
import { CreateOAuthClientCommand, ListOAuthClientsQuery, RejectAgentClientTypeGuard } from './oauth-clients/oauth-clients.handlers';

/** Contract "Agents and OAuth": legacy OAuth clients; agent clients have their own endpoint (spec 7.4). */
@ApiTags('dashboard')
@Controller('v1/auth/dashboard/tenants/:slug/oauth-clients')
export class OAuthClientsController {
  constructor(
    private readonly commandBus: CommandBus,
    private readonly queryBus: QueryBus,
  ) {}

  @Post()
  @HttpCode(201)
  // decorators apply bottom-up: the session guard runs first, then the agent check (before validation)
  @UseGuards(RejectAgentClientTypeGuard)
  @DashboardAuth({ tenant: true, owner: true, reauth: true })
  @ApiOperation({ summary: 'Register a legacy OAuth client (owner, signed in or reauthenticated recently); a confidential client gets client_secret once; client_type agent is 400' })
  @ApiCreatedResponse({ type: CreatedOAuthClientResponse })
  @ApiProblems('auth/reauth_required', ...Problems.dashboardWrite, ...Problems.tenant, ...Problems.owner, ...Problems.input, 'oauth_client/use_agents_endpoint')
  create(@CurrentDashboard() s: DashboardPrincipal, @Body() body: CreateOAuthClientRequestDto): Promise<CreatedOAuthClientResponse> {
    return this.commandBus.execute(new CreateOAuthClientCommand(s, body));
  }

  @Get()
  @DashboardAuth({ tenant: true })
  @ApiOperation({ summary: 'List legacy OAuth clients, newest first' })
  @ApiPageResponse(OAuthClientResponse)
  @ApiProblems(...Problems.dashboardRead, ...Problems.tenant, ...Problems.list)
  list(@CurrentDashboard() s: DashboardPrincipal, @Query() q: ListOAuthClientsRequestDto): Promise<Page<OAuthClientResponse>> {
    return this.queryBus.execute(new ListOAuthClientsQuery(s.tenant!.id, q.limit ?? 20, q.cursor));
  }
}
