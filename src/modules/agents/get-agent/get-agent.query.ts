import { Query } from '@nestjs/cqrs';
import { AgentResponse } from '../agent.response.dto';

/** spec 4.4: one agent of the tenant (any state); another tenant's id is 404. */
export class GetAgentQuery extends Query<AgentResponse> {
  constructor(
    readonly tenantId: string,
    readonly agentId: string,
  ) {
    super();
  }
}
