import { Query } from '@nestjs/cqrs';
import { Page } from '../../../shared/db/pagination';
import { AgentActionResponse } from '../agent.response.dto';

/** spec 4.4: the agent's activity timeline, newest first, cursor-paginated. */
export class AgentActivityQuery extends Query<Page<AgentActionResponse>> {
  constructor(
    readonly tenantId: string,
    readonly role: 'owner' | 'member',
    readonly agentId: string,
    readonly limit: number,
    readonly filters: { since?: string; until?: string; actorUserId?: string; actionType?: string },
    readonly cursor?: string,
  ) {
    super();
  }
}
