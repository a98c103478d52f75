import { Command } from '@nestjs/cqrs';
import { DashboardPrincipal } from '../../../shared/auth/auth-context';
import { AgentWithSecretResponse } from '../agent.response.dto';

/** spec 4.4: a new client_secret, revealed once; the old one stops working at once; 409 after revocation. */
export class RotateAgentSecretCommand extends Command<AgentWithSecretResponse> {
  constructor(
    readonly actor: DashboardPrincipal,
    readonly agentId: string,
  ) {
    super();
  }
}
