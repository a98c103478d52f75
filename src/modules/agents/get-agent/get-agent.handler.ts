import { IQueryHandler, QueryHandler } from '@nestjs/cqrs';
import { Db } from '../../../shared/db/db.service';
import { findTenantAgent } from '../agent.errors';
import { AgentResponse, toAgentResponse } from '../agent.response.dto';
import { GetAgentQuery } from './get-agent.query';

@QueryHandler(GetAgentQuery)
export class GetAgentHandler implements IQueryHandler<GetAgentQuery> {
  constructor(private readonly db: Db) {}

  async execute(q: GetAgentQuery): Promise<AgentResponse> {
    return toAgentResponse(await findTenantAgent(this.db, q.tenantId, q.agentId));
  }
}
