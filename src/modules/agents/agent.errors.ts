import { AppError } from '../../shared/errors/app-error';
import { Queryable } from '../../shared/db/db.service';
import { UuidParam } from '../../shared/http/uuid-param';
import { AGENT_GRANT_TYPES } from './agents.service';
import { AGENT_COLUMNS, AgentRow } from './agent.response.dto';

/** Unknown agent, malformed id or another tenant's agent: the same 404 (spec 7.4, 1). */
export const agentNotFound = () => new AppError('agent/not_found');

/** A path id that must be a UUID; anything else is the same 404 as an unknown agent. */
export const AgentIdParam = (name: string) => UuidParam(name, 'agent/not_found');

const ALLOWED = new Set<string>(AGENT_GRANT_TYPES);

/** spec 7.4: grant types from the allowlist (422 agent/invalid_grant_type); redirect_uris empty (422 agent/invalid_field). */
export function checkAgentFields(f: { grant_types?: string[]; redirect_uris?: unknown[] }): void {
  // one errors[] entry per refused item, named by its position (as every list's item errors are)
  const bad = (f.grant_types ?? []).map((g, i) => ({ g, i })).filter(({ g }) => !ALLOWED.has(g));
  if (bad.length)
    throw new AppError('agent/invalid_grant_type', `Grant types outside the agent allowlist: ${bad.map(({ g }) => shown(g)).join(', ')}`, {
      errors: bad.map(({ i }) => ({ field: `grant_types.${i}`, message: `grant_types must each be one of ${AGENT_GRANT_TYPES.join(', ')}` })),
    });
  if (f.redirect_uris && f.redirect_uris.length > 0)
    throw new AppError('agent/invalid_field', 'Agents are headless: redirect_uris must be empty or absent', {
      errors: [{ field: 'redirect_uris', message: 'redirect_uris must be empty' }],
    });
}

/** A refused value as the error names it: JSON-quoted, cut at 64 characters (a value can be as long as the body allows). */
const shown = (v: string): string => JSON.stringify(v.length > 64 ? `${v.slice(0, 64)}…` : v);

/** The tenant's agent, or 404 (also for another tenant's id). */
export async function findTenantAgent(q: Queryable, tenantId: string, agentId: string): Promise<AgentRow> {
  const [row] = await q.query<AgentRow>(`SELECT ${AGENT_COLUMNS} FROM agent_clients WHERE id = $1 AND tenant_id = $2`, [agentId, tenantId]);
  if (!row) throw agentNotFound();
  return row;
}

/** After a conditional update matched nothing: 404 when the agent is not the tenant's, else 409 (revoked). */
export async function notUpdatable(q: Queryable, tenantId: string, agentId: string): Promise<never> {
  const row = await findTenantAgent(q, tenantId, agentId);
  if (row.revoked_at) throw new AppError('agent/already_revoked', 'The agent was revoked; revocation is final');
  throw new AppError('server/error', 'conditional agent update matched nothing');
}
