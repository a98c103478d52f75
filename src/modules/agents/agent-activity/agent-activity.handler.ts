import { IQueryHandler, QueryHandler } from '@nestjs/cqrs';
import { Db } from '../../../shared/db/db.service';
import { keysetPosition, Page, toPage } from '../../../shared/db/pagination';
import { AppError } from '../../../shared/errors/app-error';
import { utcInstant } from '../../../shared/http/dates';
import { findTenantAgent } from '../agent.errors';
import { AgentActionResponse } from '../agent.response.dto';
import { AgentActivityQuery } from './agent-activity.query';

interface ActionRow {
  id: string;
  action: string;
  actor_user_id: string | null;
  actor_user_email: string | null;
  resource: string | null;
  method_or_event: string | null;
  jti: string | null;
  scope_used: string | null;
  ip_hash_prefix: string | null;
  user_agent_hash_prefix: string | null;
  created_at: Date;
  created_at_text: string;
}

/** Optional fields of AgentActionResponse are left out when empty. */
function toResponse(r: ActionRow): AgentActionResponse {
  const out: AgentActionResponse = { id: r.id, action: r.action, created_at: r.created_at.toISOString() };
  if (r.actor_user_id) out.actor_user_id = r.actor_user_id;
  if (r.actor_user_email) out.actor_user_email = r.actor_user_email;
  if (r.resource) out.resource = r.resource;
  if (r.method_or_event) out.method_or_event = r.method_or_event;
  if (r.jti) out.jti = r.jti;
  if (r.scope_used) out.scope_used = r.scope_used;
  // spec 2.10: only 12-char prefixes leave the service, never the stored values beyond that
  if (r.ip_hash_prefix) out.ip_hash_prefix = r.ip_hash_prefix.slice(0, 12);
  if (r.user_agent_hash_prefix) out.user_agent_hash_prefix = r.user_agent_hash_prefix.slice(0, 12);
  return out;
}

/**
 * spec 4.4: "only a tenant user with role owner may read other users' actions". A dashboard
 * member is no end user of the tenant, so every action taken on behalf of an end user is another
 * user's: members see only the actions without an acting end user (client-level actions), and a
 * member filtering by actor_user_id is 403 auth/forbidden.
 */
@QueryHandler(AgentActivityQuery)
export class AgentActivityHandler implements IQueryHandler<AgentActivityQuery> {
  constructor(private readonly db: Db) {}

  async execute(q: AgentActivityQuery): Promise<Page<AgentActionResponse>> {
    const owner = q.role === 'owner';
    // in UTC: an offset PostgreSQL cannot read (beyond ±15:59, valid RFC 3339) is no 400
    const [since, until] = [q.filters.since, q.filters.until].map((v) => (v ? utcInstant(v) : undefined));
    if (since && until && Date.parse(since) > Date.parse(until)) {
      throw new AppError('request/invalid', 'since must not be after until', { errors: [{ field: 'since', message: 'since must not be after until' }] });
    }
    // the agent first: an unknown or another tenant's agent is 404 whoever asks (spec 1, 7.4)
    await findTenantAgent(this.db, q.tenantId, q.agentId);
    if (!owner && q.filters.actorUserId) throw new AppError('auth/forbidden', "Only tenant owners may read other users' actions");
    const list = `agent_activity:${q.tenantId}:${q.agentId}`;
    const pos = keysetPosition(q.cursor, list);
    const rows = await this.db
      .query<ActionRow>(
        `SELECT a.id, a.action, a.actor_user_id, u.email AS actor_user_email, a.resource, a.method_or_event, a.jti, a.scope_used,
                a.ip_hash_prefix, a.user_agent_hash_prefix, a.created_at, a.created_at::text AS created_at_text
           FROM agent_actions a
           LEFT JOIN users u ON u.id = a.actor_user_id AND u.tenant_id = a.tenant_id
          WHERE a.agent_client_id = $1 AND a.tenant_id = $2
            AND ($3::boolean OR a.actor_user_id IS NULL)
            AND ($4::timestamptz IS NULL OR a.created_at >= $4::timestamptz)
            AND ($5::timestamptz IS NULL OR a.created_at < $5::timestamptz)
            AND ($6::uuid IS NULL OR a.actor_user_id = $6::uuid)
            AND ($7::text IS NULL OR a.action = $7::text)
            AND ($8::timestamptz IS NULL OR (a.created_at, a.id) < ($8::timestamptz, $9::uuid))
          ORDER BY a.created_at DESC, a.id DESC LIMIT $10`,
        [q.agentId, q.tenantId, owner, since ?? null, until ?? null, q.filters.actorUserId ?? null, q.filters.actionType ?? null, pos?.[0] ?? null, pos?.[1] ?? null, q.limit + 1],
      )
      .catch((e: { code?: string }) => {
        // a value PostgreSQL cannot cast (a cursor we never issued, an out-of-range date) is bad input
        if (e.code === '22P02' || e.code === '22007' || e.code === '22008') throw new AppError('request/invalid', 'A query value is out of range');
        throw e;
      });
    return toPage(rows, q.limit, toResponse, (r) => [r.created_at_text, r.id], list);
  }
}
