import { Body, Controller, Delete, Get, HttpCode, Patch, Post, Query } from '@nestjs/common';
import { CommandBus, QueryBus } from '@nestjs/cqrs';
import { ApiCreatedResponse, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { CurrentDashboard, DashboardPrincipal } from '../../shared/auth/auth-context';
import { DashboardAuth } from '../../shared/auth/dashboard.guard';
import { Page } from '../../shared/db/pagination';
import { ApiPageResponse, ApiProblems, Problems } from '../../shared/http/api-docs';
import { AgentActivityQuery } from './agent-activity/agent-activity.query';
import { AgentActivityRequestDto } from './agent-activity/agent-activity.request.dto';
import { AgentIdParam } from './agent.errors';
import { RegisterAgentRequestDto, UpdateAgentRequestDto } from './agent.request.dto';
import { AgentActionResponse, AgentResponse, AgentWithSecretResponse, KillAgentTokensResponse, RevokeAgentResponse } from './agent.response.dto';
import { DisableAgentCommand } from './disable-agent/disable-agent.command';
import { GetAgentQuery } from './get-agent/get-agent.query';
import { KillAgentTokensCommand } from './kill-agent-tokens/kill-agent-tokens.command';
import { ListAgentsQuery } from './list-agents/list-agents.query';
import { ListAgentsRequestDto } from './list-agents/list-agents.request.dto';
import { RegisterAgentCommand } from './register-agent/register-agent.command';
import { RevokeAgentCommand } from './revoke-agent/revoke-agent.command';
import { RotateAgentSecretCommand } from './rotate-agent-secret/rotate-agent-secret.command';
import { UpdateAgentCommand } from './update-agent/update-agent.command';

/** spec 4.4 (and the contract's disable and kill-tokens): members read, owners write. */
@ApiTags('agents (tenant admin)')
@Controller('v1/auth/dashboard/tenants/:slug/agents')
export class AgentsController {
  constructor(
    private readonly commandBus: CommandBus,
    private readonly queryBus: QueryBus,
  ) {}

  @Post()
  @HttpCode(201)
  @DashboardAuth({ tenant: true, owner: true, reauth: true })
  @ApiOperation({ summary: 'Register an agent client (owner, Pro tier or higher); client_secret is shown once' })
  @ApiCreatedResponse({ type: AgentWithSecretResponse, description: 'the agent plus its client_secret (shown once)' })
  @ApiProblems('auth/reauth_required', ...Problems.dashboardWrite, ...Problems.tenant, ...Problems.owner, ...Problems.input, 'agent/tier_unauthorized', 'agent/invalid_grant_type', 'agent/invalid_field', 'agent/limit_reached')
  register(@CurrentDashboard() s: DashboardPrincipal, @Body() body: RegisterAgentRequestDto): Promise<AgentWithSecretResponse> {
    return this.commandBus.execute(new RegisterAgentCommand(s, body));
  }

  @Get()
  @DashboardAuth({ tenant: true })
  @ApiOperation({ summary: 'List agent clients, newest first (revoked ones with include_revoked=true)' })
  @ApiPageResponse(AgentResponse)
  @ApiProblems(...Problems.dashboardRead, ...Problems.tenant, ...Problems.list)
  list(@CurrentDashboard() s: DashboardPrincipal, @Query() q: ListAgentsRequestDto): Promise<Page<AgentResponse>> {
    return this.queryBus.execute(new ListAgentsQuery(s.tenant!.id, q.limit ?? 20, q.include_revoked ?? false, q.cursor));
  }

  @Get(':agentId')
  @DashboardAuth({ tenant: true })
  @ApiOperation({ summary: 'One agent client' })
  @ApiOkResponse({ type: AgentResponse })
  @ApiProblems(...Problems.dashboardRead, ...Problems.tenant, 'agent/not_found')
  get(@CurrentDashboard() s: DashboardPrincipal, @AgentIdParam('agentId') agentId: string): Promise<AgentResponse> {
    return this.queryBus.execute(new GetAgentQuery(s.tenant!.id, agentId));
  }

  @Patch(':agentId')
  // a PATCH may widen an agent (scopes, lifetime, limits) or switch a disabled one back on (its
  // grant types): a recent sign-in, as minting credentials needs (a stolen cookie cannot)
  @DashboardAuth({ tenant: true, owner: true, reauth: true })
  @ApiOperation({ summary: 'Update agent fields (partial; owner, after a recent sign-in or reauth); bumps agent_metadata_version; 409 once revoked' })
  @ApiOkResponse({ type: AgentResponse })
  @ApiProblems('auth/reauth_required', ...Problems.dashboardWrite, ...Problems.tenant, ...Problems.owner, ...Problems.input, 'agent/not_found', 'agent/already_revoked', 'agent/invalid_grant_type', 'agent/invalid_field')
  update(@CurrentDashboard() s: DashboardPrincipal, @AgentIdParam('agentId') agentId: string, @Body() body: UpdateAgentRequestDto): Promise<AgentResponse> {
    return this.commandBus.execute(new UpdateAgentCommand(s, agentId, body));
  }

  @Post(':agentId/rotate-secret')
  @HttpCode(200)
  @DashboardAuth({ tenant: true, owner: true, reauth: true })
  @ApiOperation({ summary: 'Replace the client secret (the new one is shown once); 409 once revoked' })
  @ApiOkResponse({ type: AgentWithSecretResponse, description: 'the agent plus its new client_secret (shown once)' })
  @ApiProblems('auth/reauth_required', ...Problems.dashboardWrite, ...Problems.tenant, ...Problems.owner, 'agent/not_found', 'agent/already_revoked')
  rotate(@CurrentDashboard() s: DashboardPrincipal, @AgentIdParam('agentId') agentId: string): Promise<AgentWithSecretResponse> {
    return this.commandBus.execute(new RotateAgentSecretCommand(s, agentId));
  }

  @Delete(':agentId')
  @HttpCode(200)
  @DashboardAuth({ tenant: true, owner: true })
  @ApiOkResponse({ type: RevokeAgentResponse })
  @ApiProblems(...Problems.dashboardWrite, ...Problems.tenant, ...Problems.owner, 'agent/not_found')
  @ApiOperation({ summary: 'Revoke an agent client (final): denylists its tokens, emits agent.revoked, emails the owners; idempotent' })
  revoke(@CurrentDashboard() s: DashboardPrincipal, @AgentIdParam('agentId') agentId: string): Promise<RevokeAgentResponse> {
    return this.commandBus.execute(new RevokeAgentCommand(s, agentId));
  }

  @Post(':agentId/disable')
  @HttpCode(200)
  @DashboardAuth({ tenant: true, owner: true })
  @ApiOperation({ summary: 'Disable an agent client: clears its grant types (PATCH grant_types enables it again)' })
  @ApiOkResponse({ type: AgentResponse })
  @ApiProblems(...Problems.dashboardWrite, ...Problems.tenant, ...Problems.owner, 'agent/not_found', 'agent/already_revoked')
  disable(@CurrentDashboard() s: DashboardPrincipal, @AgentIdParam('agentId') agentId: string): Promise<AgentResponse> {
    return this.commandBus.execute(new DisableAgentCommand(s, agentId));
  }

  @Post(':agentId/kill-tokens')
  @HttpCode(200)
  @DashboardAuth({ tenant: true, owner: true })
  @ApiOkResponse({ type: KillAgentTokensResponse })
  @ApiProblems(...Problems.dashboardWrite, ...Problems.tenant, ...Problems.owner, 'agent/not_found', 'agent/already_revoked')
  @ApiOperation({
    summary: "Denylist the agent's outstanding tokens without revoking it",
    description: 'Tokens issued up to not_before (whole seconds: its own second included) are refused. Token exchanges asked for in that second wait until the next second and are then issued normally.',
  })
  killTokens(@CurrentDashboard() s: DashboardPrincipal, @AgentIdParam('agentId') agentId: string): Promise<KillAgentTokensResponse> {
    return this.commandBus.execute(new KillAgentTokensCommand(s, agentId));
  }

  @Get(':agentId/activity')
  @DashboardAuth({ tenant: true })
  @ApiOperation({ summary: "The agent's activity timeline; members see only actions without an acting end user" })
  @ApiPageResponse(AgentActionResponse)
  @ApiProblems(...Problems.dashboardRead, ...Problems.tenant, ...Problems.list, 'auth/forbidden', 'agent/not_found')
  activity(@CurrentDashboard() s: DashboardPrincipal, @AgentIdParam('agentId') agentId: string, @Query() q: AgentActivityRequestDto): Promise<Page<AgentActionResponse>> {
    const filters = { since: q.since, until: q.until, actorUserId: q.actor_user_id, actionType: q.action_type };
    return this.queryBus.execute(new AgentActivityQuery(s.tenant!.id, s.tenant!.role, agentId, q.limit ?? 50, filters, q.cursor));
  }
}
