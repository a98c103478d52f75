import { Command } from '@nestjs/cqrs';
import { DashboardPrincipal } from '../../../shared/auth/auth-context';
import { RevokeAgentResponse } from '../agent.response.dto';

/** spec 3.2, 4.4 DELETE: revoke an agent client (final); a repeat answers the first revoked_at. */
export class RevokeAgentCommand extends Command<RevokeAgentResponse> {
  constructor(
    readonly actor: DashboardPrincipal,
    readonly agentId: string,
  ) {
    super();
  }
}
