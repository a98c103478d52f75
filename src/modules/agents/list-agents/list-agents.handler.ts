import { IQueryHandler, QueryHandler } from '@nestjs/cqrs';
import { Db } from '../../../shared/db/db.service';
import { keysetPosition, Page, toPage } from '../../../shared/db/pagination';
import { AGENT_COLUMNS, AgentResponse, AgentRow, toAgentResponse } from '../agent.response.dto';
import { ListAgentsQuery } from './list-agents.query';

@QueryHandler(ListAgentsQuery)
export class ListAgentsHandler implements IQueryHandler<ListAgentsQuery> {
  constructor(private readonly db: Db) {}

  async execute(q: ListAgentsQuery): Promise<Page<AgentResponse>> {
    const list = `agents:${q.tenantId}`;
    const pos = keysetPosition(q.cursor, list);
    const rows = await this.db.query<AgentRow & { created_at_text: string }>(
      `SELECT ${AGENT_COLUMNS}, created_at::text AS created_at_text FROM agent_clients
        WHERE tenant_id = $1 AND ($2::boolean OR revoked_at IS NULL)
          AND ($3::timestamptz IS NULL OR (created_at, id) < ($3::timestamptz, $4::uuid))
        ORDER BY created_at DESC, id DESC LIMIT $5`,
      [q.tenantId, q.includeRevoked, pos?.[0] ?? null, pos?.[1] ?? null, q.limit + 1],
    );
    return toPage(rows, q.limit, toAgentResponse, (r) => [r.created_at_text, r.id], list);
  }
}
