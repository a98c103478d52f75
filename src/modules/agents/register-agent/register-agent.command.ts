import { Command } from '@nestjs/cqrs';
import { DashboardPrincipal } from '../../../shared/auth/auth-context';
import { RegisterAgentRequestDto } from '../agent.request.dto';
import { AgentWithSecretResponse } from '../agent.response.dto';

/** spec 4.4: register an agent client (owner; Pro tier or higher). */
export class RegisterAgentCommand extends Command<AgentWithSecretResponse> {
  constructor(
    readonly actor: DashboardPrincipal,
    readonly body: RegisterAgentRequestDto,
  ) {
    super();
  }
}
