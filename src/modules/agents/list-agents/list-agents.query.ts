import { Query } from '@nestjs/cqrs';
import { Page } from '../../../shared/db/pagination';
import { AgentResponse } from '../agent.response.dto';

/** spec 4.4: the tenant's agents, newest first, cursor-paginated; revoked ones only on request. */
export class ListAgentsQuery extends Query<Page<AgentResponse>> {
  constructor(
    readonly tenantId: string,
    readonly limit: number,
    readonly includeRevoked: boolean,
    readonly cursor?: string,
  ) {
    super();
  }
}
