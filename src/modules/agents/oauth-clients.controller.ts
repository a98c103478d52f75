import { Body, Controller, Delete, Get, HttpCode, Post, Query, UseGuards } from '@nestjs/common';
import { CommandBus, QueryBus } from '@nestjs/cqrs';
import { ApiCreatedResponse, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { CurrentDashboard, DashboardPrincipal } from '../../shared/auth/auth-context';
import { DashboardAuth } from '../../shared/auth/dashboard.guard';
import { Page } from '../../shared/db/pagination';
import { ApiPageResponse, ApiProblems, Problems } from '../../shared/http/api-docs';
import { CreatedOAuthClientResponse, CreateOAuthClientRequestDto, ListOAuthClientsRequestDto, OAuthClientResponse } from './oauth-clients/oauth-clients.dto';
import { CreateOAuthClientCommand, ListOAuthClientsQuery, RejectAgentClientTypeGuard } from './oauth-clients/oauth-clients.handlers';
import { GetOAuthClientQuery } from './oauth-clients/get-oauth-client.query';
import { OAuthClientIdParam } from './oauth-clients/oauth-client.errors';
import { RevokeOAuthClientCommand } from './oauth-clients/revoke-oauth-client.command';
import { RotateOAuthClientSecretCommand } from './oauth-clients/rotate-oauth-client-secret.command';

/** Contract "Agents and OAuth": legacy OAuth clients (members read, owners write); agent clients have their own endpoint (spec 7.4). */
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
  @ApiProblems('auth/reauth_required', ...Problems.dashboardWrite, ...Problems.tenant, ...Problems.owner, ...Problems.input, 'oauth_client/use_agents_endpoint', 'oauth_client/limit_reached')
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

  @Get(':clientId')
  @DashboardAuth({ tenant: true })
  @ApiOperation({ summary: 'One legacy OAuth client (any state); never its secret' })
  @ApiOkResponse({ type: OAuthClientResponse })
  @ApiProblems(...Problems.dashboardRead, ...Problems.tenant, 'oauth_client/not_found')
  get(@CurrentDashboard() s: DashboardPrincipal, @OAuthClientIdParam('clientId') clientId: string): Promise<OAuthClientResponse> {
    return this.queryBus.execute(new GetOAuthClientQuery(s.tenant!.id, clientId));
  }

  @Post(':clientId/rotate-secret')
  @HttpCode(200)
  @DashboardAuth({ tenant: true, owner: true, reauth: true })
  @ApiOperation({ summary: 'Replace the client secret of a confidential client (the new one is shown once, the old one is refused at once); 409 once revoked or for a public client' })
  @ApiOkResponse({ type: CreatedOAuthClientResponse, description: 'the client plus its new client_secret (shown once)' })
  @ApiProblems('auth/reauth_required', ...Problems.dashboardWrite, ...Problems.tenant, ...Problems.owner, 'oauth_client/not_found', 'oauth_client/already_revoked', 'oauth_client/not_confidential')
  rotate(@CurrentDashboard() s: DashboardPrincipal, @OAuthClientIdParam('clientId') clientId: string): Promise<CreatedOAuthClientResponse> {
    return this.commandBus.execute(new RotateOAuthClientSecretCommand(s, clientId));
  }

  @Delete(':clientId')
  @HttpCode(200)
  @DashboardAuth({ tenant: true, owner: true })
  @ApiOperation({ summary: 'Revoke a legacy OAuth client (final): its authentication at /oauth/* is refused at once; idempotent (a repeat answers the first revoked_at)' })
  @ApiOkResponse({ type: OAuthClientResponse, description: 'the client with its revoked_at' })
  @ApiProblems(...Problems.dashboardWrite, ...Problems.tenant, ...Problems.owner, 'oauth_client/not_found')
  revoke(@CurrentDashboard() s: DashboardPrincipal, @OAuthClientIdParam('clientId') clientId: string): Promise<OAuthClientResponse> {
    return this.commandBus.execute(new RevokeOAuthClientCommand(s, clientId));
  }
}
