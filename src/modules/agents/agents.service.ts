import { Injectable } from '@nestjs/common';
import { ClientHasher } from '../../shared/crypto/client-hash';
import { Db, Queryable } from '../../shared/db/db.service';
import type { AgentRow } from './agent.response.dto';
import { insertRowSql, insertRowsSql, transpose } from '../../shared/db/insert-row.sql';
import { AgentClientCache } from './agent-client.cache';
import { UUID } from '../../shared/uuid';

/** Keys of `agent_settings.rate_limits` (spec 2.10). */
export const AGENT_RATE_LIMIT_KEYS = [
  'token_exchange_per_min',
  'ciba_initiate_per_min',
  'device_code_per_min',
  'client_credentials_per_min',
  'api_calls_per_min',
] as const;
export type AgentRateLimitKey = (typeof AGENT_RATE_LIMIT_KEYS)[number];
export type AgentRateLimits = Partial<Record<AgentRateLimitKey, number>>;

/**
 * The rate-limit counters (RateLimitService buckets) of the per-agent overrides that are enforced,
 * each keyed by `agentLimitKey(agent id)`: token exchanges and bearer calls per minute.
 */
export const AGENT_LIMIT_BUCKETS: Partial<Record<AgentRateLimitKey, string>> = {
  token_exchange_per_min: 'token_exchange_client',
  api_calls_per_min: 'agent_api_calls',
};

export function agentLimitKey(agentId: string): string {
  return `agent:${agentId}`;
}

/** Hard ceiling of every agent rate-limit override (spec 8, RATE_LIMIT_OAUTH_AGENT_CEILING). */
export const RATE_LIMIT_OAUTH_AGENT_CEILING = 600;

/** Grant types an agent client may hold (spec 7.4). */
export const AGENT_GRANT_TYPES = [
  'urn:ietf:params:oauth:grant-type:token-exchange',
  'urn:openid:params:grant-type:ciba',
  'urn:ietf:params:oauth:grant-type:device_code',
  'client_credentials',
] as const;

/** An agent client row as the token endpoint needs it (spec 2.10, 3.2): with its tenant's tier and the secret hash. */
export interface AgentClientRow extends AgentRow {
  tenant_tier: 'free' | 'pro' | 'enterprise';
  /**
   * the tenant's `user_scopes` (space-separated): an exchange grants none outside them, so a scope
   * the owner removed is not minted from a subject token signed before (absent from a row cached
   * before it was read: no such narrowing then)
   */
  tenant_user_scopes?: string;
  secret_hash: string;
}

/** One row of the activity timeline (spec 4.4); raw IP and user agent are hashed here, never stored. */
export interface AgentActionInput {
  tenantId: string;
  agentClientId: string;
  /** e.g. `token_exchange`; the `action_type` filter of the timeline matches it */
  action: string;
  actorUserId?: string | null;
  resource?: string | null;
  methodOrEvent?: string | null;
  jti?: string | null;
  scopeUsed?: string | null;
  /** raw client address: stored only as a 12-hex keyed hash prefix (ClientHasher) */
  ip?: string | null;
  /** raw user agent: stored only as a 12-hex keyed hash prefix (ClientHasher) */
  userAgent?: string | null;
}

const ACTION_COLUMNS = [
  ['tenant_id', 'uuid'], ['agent_client_id', 'uuid'], ['action', 'text'], ['actor_user_id', 'uuid'], ['resource', 'text'], ['method_or_event', 'text'],
  ['jti', 'text'], ['scope_used', 'text'], ['ip_hash_prefix', 'text'], ['user_agent_hash_prefix', 'text'],
] as const;

/**
 * What the agents module offers other modules (the token endpoint): client lookup and the
 * activity timeline writer. The agents module owns agent_clients and agent_actions.
 */
@Injectable()
export class AgentsService {
  constructor(
    private readonly db: Db,
    private readonly cache: AgentClientCache,
    private readonly hasher: ClientHasher,
  ) {}

  /** The agent client with this client_id (= agent id) in any state, or null (also for a non-UUID). */
  async findClient(clientId: string): Promise<AgentClientRow | null> {
    if (!UUID.test(clientId)) return null;
    const row = await this.cache.read(clientId, async () => {
      const [r] = await this.db.query<AgentClientRow>(
        `SELECT a.id, a.tenant_id, t.tier AS tenant_tier, t.user_scopes AS tenant_user_scopes, a.name, a.description, a.agent_class, a.logo_url, a.scopes,
                a.grant_types, a.agent_token_max_ttl_sec, a.rate_limits, a.max_concurrent_tokens, a.secret_hash,
                a.agent_metadata_version, a.created_at, a.updated_at, a.disabled_at, a.revoked_at
           FROM agent_clients a JOIN tenants t ON t.id = a.tenant_id
          WHERE a.id = $1`,
        [clientId],
        'agents_find_client',
      );
      return r;
    });
    if (!row) return null;
    // a cached row comes back from JSON: its timestamps as strings
    for (const k of ['created_at', 'updated_at', 'disabled_at', 'revoked_at'] as const) if (row[k] !== null) row[k] = new Date(row[k]);
    return row;
  }

  /** Like findClient, but null when the agent is revoked or disabled (spec 3.2). */
  async findActiveClient(clientId: string): Promise<AgentClientRow | null> {
    const row = await this.findClient(clientId);
    return row && !row.revoked_at && !row.disabled_at ? row : null;
  }

  /** Writes one agent_actions row with the caller's transaction (or the pool). */
  async recordAction(q: Queryable, a: AgentActionInput): Promise<void> {
    const [sql, params] = this.recordActionSql(a, 1);
    await q.query(sql, params);
  }

  /** The INSERT of recordAction with parameters numbered from `from`, to compose into a CTE. */
  recordActionSql(a: AgentActionInput, from: number): [string, unknown[]] {
    return [insertRowSql('agent_actions', ACTION_COLUMNS, from), this.actionValues(a)];
  }

  /** The INSERT of several agent_actions rows (one array parameter per column); `when`: see insertRowsSql. */
  recordActionsSql(actions: AgentActionInput[], from: number, when?: string): [string, unknown[]] {
    return [insertRowsSql('agent_actions', ACTION_COLUMNS, from, when), transpose(actions.map((a) => this.actionValues(a)), ACTION_COLUMNS.length)];
  }

  /** Column values of one row; the raw IP and user agent become keyed hash prefixes here. */
  private actionValues(a: AgentActionInput): unknown[] {
    return [
      a.tenantId,
      a.agentClientId,
      a.action,
      a.actorUserId ?? null,
      a.resource ?? null,
      a.methodOrEvent ?? null,
      a.jti ?? null,
      a.scopeUsed ?? null,
      this.hasher.optional(a.ip),
      this.hasher.optional(a.userAgent),
    ];
  }
}
