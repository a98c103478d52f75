import { Command } from '@nestjs/cqrs';
import { DashboardPrincipal } from '../../../shared/auth/auth-context';
import { AgentResponse } from '../agent.response.dto';

/** spec 3.2 "dashboard disable action": the agent stays active with its grant types cleared. */
export class DisableAgentCommand extends Command<AgentResponse> {
  constructor(
    readonly actor: DashboardPrincipal,
    readonly agentId: string,
  ) {
    super();
  }
}
