import { Command } from '@nestjs/cqrs';
import { DashboardPrincipal } from '../../../shared/auth/auth-context';
import { UpdateAgentRequestDto } from '../agent.request.dto';
import { AgentResponse } from '../agent.response.dto';

/** spec 4.4 PATCH: partial update; bumps agent_metadata_version; 409 after revocation (3.2). */
export class UpdateAgentCommand extends Command<AgentResponse> {
  constructor(
    readonly actor: DashboardPrincipal,
    readonly agentId: string,
    readonly body: UpdateAgentRequestDto,
  ) {
    super();
  }
}
