import { Controller, Delete, Get, HttpCode, Post, Query, UseGuards } from '@nestjs/common';
import { CommandBus, QueryBus } from '@nestjs/cqrs';
import { ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { CurrentUser, UserPrincipal } from '../../shared/auth/auth-context';
import { BearerAuth } from '../../shared/auth/guards';
import { Page } from '../../shared/db/pagination';
import { ApiPageResponse, ApiProblems, Problems } from '../../shared/http/api-docs';
import { AgentIdParam } from './agent.errors';
import { ListMyAgentsRequestDto, RestoreMyAgentResponse, RevokeMyAgentResponse, UserAgentResponse } from './my-agents/my-agents.dto';
import { MyAgentsGuard } from './my-agents/my-agents.guard';
import { ListMyAgentsQuery, RestoreMyAgentCommand, RevokeMyAgentCommand } from './my-agents/my-agents.queries';

/** spec 4.5 and the contract's restore: the caller's agents within the token's tenant. */
@ApiTags('agents (end user)')
@Controller('v1/users/me/agents')
// decorators apply bottom-up: the bearer guard runs first, then MyAgentsGuard
@UseGuards(MyAgentsGuard)
@BearerAuth()
export class MyAgentsController {
  constructor(
    private readonly commandBus: CommandBus,
    private readonly queryBus: QueryBus,
  ) {}

  @Get()
  @ApiOperation({ summary: 'Agents acting on me, last_action_at descending' })
  @ApiPageResponse(UserAgentResponse)
  @ApiProblems(...Problems.bearer, 'auth/forbidden', ...Problems.list, ...Problems.rateLimited)
  list(@CurrentUser() user: UserPrincipal, @Query() q: ListMyAgentsRequestDto): Promise<Page<UserAgentResponse>> {
    return this.queryBus.execute(new ListMyAgentsQuery(user, q.limit ?? 20, q.cursor));
  }

  @Delete(':agentClientId')
  @HttpCode(200)
  @ApiOperation({ summary: "Withdraw an agent's access to me (reason gdpr_art_7_withdrawal); idempotent" })
  @ApiOkResponse({ type: RevokeMyAgentResponse })
  @ApiProblems('request/invalid', ...Problems.bearer, 'auth/forbidden', 'agent/not_found', ...Problems.rateLimited)
  revoke(@CurrentUser() user: UserPrincipal, @AgentIdParam('agentClientId') agentId: string): Promise<RevokeMyAgentResponse> {
    return this.commandBus.execute(new RevokeMyAgentCommand(user, agentId));
  }

  @Post(':agentClientId/restore')
  @HttpCode(200)
  @ApiOperation({ summary: "Give an agent its access to me back; still_blocked_by tenant when the tenant's block remains" })
  @ApiOkResponse({ type: RestoreMyAgentResponse })
  @ApiProblems('request/invalid', ...Problems.bearer, 'auth/forbidden', 'agent/not_found', ...Problems.rateLimited)
  restore(@CurrentUser() user: UserPrincipal, @AgentIdParam('agentClientId') agentId: string): Promise<RestoreMyAgentResponse> {
    return this.commandBus.execute(new RestoreMyAgentCommand(user, agentId));
  }
}
