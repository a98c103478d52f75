import { Module } from '@nestjs/common';
import { AgentActivityHandler } from './agent-activity/agent-activity.handler';
import { AgentApiLimitService } from './agent-api-limit.service';
import { AgentClientCache } from './agent-client.cache';
import { AgentDenylistService } from './agent-denylist.service';
import { AgentTokenSlotsService } from './agent-token-slots.service';
import { AgentsController } from './agents.controller';
import { AgentsService } from './agents.service';
import { DisableAgentHandler } from './disable-agent/disable-agent.handler';
import { GetAgentHandler } from './get-agent/get-agent.handler';
import { KillAgentTokensHandler } from './kill-agent-tokens/kill-agent-tokens.handler';
import { ListAgentsHandler } from './list-agents/list-agents.handler';
import { MyAgentsController } from './my-agents.controller';
import { MyAgentsGuard } from './my-agents/my-agents.guard';
import { ListMyAgentsHandler, RestoreMyAgentHandler, RevokeMyAgentHandler } from './my-agents/my-agents.handlers';
import { OAuthClientsController } from './oauth-clients.controller';
import { CreateOAuthClientHandler, ListOAuthClientsHandler, RejectAgentClientTypeGuard } from './oauth-clients/oauth-clients.handlers';
import { GetOAuthClientHandler } from './oauth-clients/get-oauth-client.handler';
import { RevokeOAuthClientHandler } from './oauth-clients/revoke-oauth-client.handler';
import { RotateOAuthClientSecretHandler } from './oauth-clients/rotate-oauth-client-secret.handler';
import { RegisterAgentHandler } from './register-agent/register-agent.handler';
import { RevokeAgentHandler } from './revoke-agent/revoke-agent.handler';
import { RotateAgentSecretHandler } from './rotate-agent-secret/rotate-agent-secret.handler';
import { UpdateAgentHandler } from './update-agent/update-agent.handler';

/**
 * AI agents (spec 2.10, 3.2, 3.3, 4.4, 4.5): the tenant-admin agents API, the end-user agents
 * API, the legacy OAuth clients endpoint and the agent denylist. Exports the client lookup and
 * the denylist for the token endpoint (src/modules/oauth).
 */
@Module({
  controllers: [AgentsController, MyAgentsController, OAuthClientsController],
  providers: [
    AgentsService,
    AgentClientCache,
    AgentDenylistService,
    AgentTokenSlotsService,
    AgentApiLimitService,
    RegisterAgentHandler,
    ListAgentsHandler,
    GetAgentHandler,
    UpdateAgentHandler,
    RotateAgentSecretHandler,
    RevokeAgentHandler,
    DisableAgentHandler,
    KillAgentTokensHandler,
    AgentActivityHandler,
    ListMyAgentsHandler,
    RevokeMyAgentHandler,
    RestoreMyAgentHandler,
    CreateOAuthClientHandler,
    ListOAuthClientsHandler,
    GetOAuthClientHandler,
    RevokeOAuthClientHandler,
    RotateOAuthClientSecretHandler,
    RejectAgentClientTypeGuard,
    MyAgentsGuard,
  ],
  exports: [AgentsService, AgentDenylistService, AgentClientCache, AgentTokenSlotsService],
})
export class AgentsModule {}
