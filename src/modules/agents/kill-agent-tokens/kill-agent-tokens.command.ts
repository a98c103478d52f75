import { Command } from '@nestjs/cqrs';
import { DashboardPrincipal } from '../../../shared/auth/auth-context';
import { KillAgentTokensResponse } from '../agent.response.dto';

/** Contract kill-tokens: denylists the agent's outstanding tokens without revoking the agent. */
export class KillAgentTokensCommand extends Command<KillAgentTokensResponse> {
  constructor(
    readonly actor: DashboardPrincipal,
    readonly agentId: string,
  ) {
    super();
  }
}
