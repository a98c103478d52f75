import { Inject, Injectable, Logger, OnModuleInit } from '@nestjs/common';
import Redis from 'ioredis';
import { AccessClaims } from '../../shared/crypto/jwt.service';
import { Db, Queryable } from '../../shared/db/db.service';
import { AppError } from '../../shared/errors/app-error';
import { writeElseDelete } from '../../shared/redis/exec-all';
import { REDIS } from '../../shared/redis/redis.module';
import { RevocationCheck, TokenRevocationService } from '../../shared/auth/token-revocation.service';
import { AGENT_TOKEN_MAX_TTL_SECONDS } from '../oauth/oauth.constants';
import { UUID } from '../../shared/uuid';
import { issuedAgentTokensSql } from './issued-tokens.sql';

export type DenylistReason = 'agent_revoked' | 'tokens_killed';

/** How long "this agent has no live denylist entry" is cached, so hot paths skip PostgreSQL. */
export const DENYLIST_NEGATIVE_TTL_SECONDS = 30;

/** Redis key caching an agent's denylist state (the key prefix is added by the client). */
export const denylistKey = (agentId: string) => `denylist:agent:${agentId}`;

/**
 * Cached state, strongest last: `0` no live entry; `<epoch seconds>` tokens issued before that
 * instant are refused (kill-tokens); `all` every token of the agent is refused (revoked).
 */
type CachedState = '0' | 'all' | `${number}`;

const rank = (v: string | null): number => (v === null ? -2 : v === '0' ? -1 : v === 'all' ? Infinity : Number(v));

// Writes the state only when it is stronger than the cached one, so a slow writer holding an older
// reading of PostgreSQL never weakens a newer one (a revoke racing a kill, a reader racing a revoke).
export const DENYLIST_MERGE_SCRIPT = `
local function rank(v)
  if not v then return -2 end
  if v == '0' then return -1 end
  if v == 'all' then return math.huge end
  return tonumber(v) or -2
end
local cur = redis.call('GET', KEYS[1])
if rank(ARGV[1]) > rank(cur) then
  redis.call('SET', KEYS[1], ARGV[1], 'EX', tonumber(ARGV[2]))
  return 1
end
return 0`;

/** Whether a token issued at `iat` (NumericDate seconds) is refused under this state. */
function refuses(state: string, iat: number): boolean {
  if (state === 'all') return true;
  if (state === '0') return false;
  const notBefore = Number(state);
  // a malformed cache value refuses (fail closed); iat has whole seconds, so a token of the kill's
  // own second is refused as well (never a pre-kill token accepted)
  return !Number.isFinite(notBefore) || !Number.isFinite(iat) || iat < notBefore;
}

/**
 * The agent denylist (spec 3.2, 5 rule 1). PostgreSQL (agent_denylist) is the source of truth;
 * Redis caches `denylist:agent:<id>` for the entry's remaining validity, so a Redis flush or
 * restart never un-revokes an agent: a miss is answered from PostgreSQL and cached again. If Redis
 * is unreachable the check fails closed (503).
 */
@Injectable()
export class AgentDenylistService implements OnModuleInit {
  private readonly log = new Logger(AgentDenylistService.name);

  constructor(
    private readonly db: Db,
    @Inject(REDIS) private readonly redis: Redis,
    private readonly revocation: TokenRevocationService,
  ) {}

  onModuleInit(): void {
    // spec 5 rule 1: the bearer guard refuses a token whose act.sub is denylisted
    this.revocation.register({ keysFor: (claims) => this.checksFor(claims) });
  }

  /** Whether a token of this agent issued at `iat` is refused. Throws 503 when Redis is unreachable. */
  async isDenied(agentId: string, iat: number): Promise<boolean> {
    if (!UUID.test(agentId)) return false;
    let cached: string | null;
    try {
      cached = await this.redis.get(denylistKey(agentId));
    } catch (cause) {
      throw new AppError('server/unavailable', 'Agent denylist unavailable', { cause });
    }
    if (cached !== null) return refuses(cached, iat);
    return refuses(await this.loadAndCache(agentId), iat);
  }

  /**
   * Whether this user withdrew this agent's access (spec 3.3): issuance for the pair is refused.
   * With `issuedAt` (a token's iat), also whether that token was issued before a withdrawal the
   * user has since undone: a restore lets the agent get new tokens, it does not bring back the
   * ones the withdrawal ended (none can be issued between the two, so every token older than the
   * restore predates the withdrawal; iat has whole seconds, and the restore commits only once the
   * second of restored_at is over, so no token issued after it shares that second).
   */
  async isUserRevoked(tenantId: string, userId: string, agentId: string, issuedAt?: number): Promise<boolean> {
    const rows = await this.db.query(
      `SELECT 1 FROM agent_user_revocations
        WHERE tenant_id = $1 AND user_id = $2 AND agent_client_id = $3
          AND (revoked_at IS NOT NULL OR restored_at >= to_timestamp($4::double precision))`,
      [tenantId, userId, agentId, issuedAt ?? null],
      'agents_user_revoked_since',
    );
    return rows.length > 0;
  }

  /**
   * Adds a denylist entry in the caller's transaction: tokens of the agent issued before now
   * (`tokens_killed`) or all of them (`agent_revoked`) are refused for `ttlSec` (the agent's
   * agent_token_max_ttl_sec, spec 3.2), or until the last of its issued tokens expires when one
   * outlives that (the TTL was lowered after it was minted): a denylisted token must never come
   * back to life. Call cacheAfterCommit once the transaction committed.
   */
  async deny(tx: Queryable, tenantId: string, agentId: string, reason: DenylistReason, ttlSec: number): Promise<{ not_before: Date; expires_at: Date }> {
    const [row] = await tx.query<{ not_before: Date; expires_at: Date }>(
      `INSERT INTO agent_denylist (tenant_id, agent_client_id, reason, not_before, expires_at)
       VALUES ($1, $2, $3, clock_timestamp(), GREATEST(
         clock_timestamp() + make_interval(secs => $4),
         (SELECT max(i.expires_at) FROM (${issuedAgentTokensSql('$2', '$5', 'clock_timestamp()')}) i)))
       RETURNING not_before, expires_at`,
      [tenantId, agentId, reason, ttlSec, AGENT_TOKEN_MAX_TTL_SECONDS],
    );
    return row;
  }

  /**
   * Caches the agent's denylist state after the transaction of `deny` committed, before the answer:
   * every process then refuses the tokens at once. Another process may hold "no entry" (cached
   * for DENYLIST_NEGATIVE_TTL_SECONDS), so a failed write is not left at that: a Redis that refuses
   * writes (out of memory under noeviction) takes a delete, and the next check reads PostgreSQL;
   * one that takes neither answers 503 server/unavailable, never a revocation that is not yet
   * enforced (the entry is committed; a repeated revoke or kill writes the cache again).
   */
  async cacheAfterCommit(agentId: string): Promise<void> {
    const { state, ttl } = await this.liveState(agentId);
    const key = denylistKey(agentId);
    await writeElseDelete(this.redis, (client) => client.pipeline().eval(DENYLIST_MERGE_SCRIPT, 1, key, state, String(ttl)), [key]).catch((e: Error) => {
      this.log.error(`denylist cache write failed for agent ${agentId}: ${e.message}`);
      throw new AppError('server/unavailable', 'The revocation is saved, but not every server could be told yet: send it again');
    });
  }

  private checksFor(claims: AccessClaims): RevocationCheck[] {
    const agentId = claims.act?.sub;
    if (typeof agentId !== 'string' || !UUID.test(agentId)) return [];
    return [
      {
        key: denylistKey(agentId),
        reason: 'agent_revoked',
        refuses: (value, c) => refuses(value, c.iat),
        onMiss: async (c) => refuses(await this.loadAndCache(agentId), c.iat),
      },
    ];
  }

  /** Reads the live entries from PostgreSQL and caches the resulting state (never weakening it). */
  private async loadAndCache(agentId: string): Promise<CachedState> {
    const { state, ttl } = await this.liveState(agentId);
    try {
      await this.redis.eval(DENYLIST_MERGE_SCRIPT, 1, denylistKey(agentId), state, String(ttl));
    } catch (e) {
      // the answer stands (it came from the source of truth); only the cache write failed
      this.log.warn(`denylist cache write failed for agent ${agentId}: ${(e as Error).message}`);
    }
    return state;
  }

  /** The state the agent's live entries in PostgreSQL give, and how long it holds (seconds). */
  private async liveState(agentId: string): Promise<{ state: CachedState; ttl: number }> {
    const rows = await this.db.query<{ reason: DenylistReason; not_before: number; remaining: number }>(
      `SELECT reason, extract(epoch FROM not_before)::float8 AS not_before, extract(epoch FROM expires_at - now())::float8 AS remaining
         FROM agent_denylist WHERE agent_client_id = $1 AND expires_at > now()`,
      [agentId],
      'agents_denylist_live',
    );
    let state: CachedState = '0';
    let ttl = DENYLIST_NEGATIVE_TTL_SECONDS;
    // the strongest live entry decides; when it expires the cache expires and is recomputed
    for (const r of rows) {
      const s: CachedState = r.reason === 'agent_revoked' ? 'all' : `${r.not_before}`;
      const remaining = Math.max(1, Math.ceil(r.remaining));
      if (rank(s) > rank(state) || (rank(s) === rank(state) && remaining > ttl)) {
        state = s;
        ttl = remaining;
      }
    }
    return { state, ttl };
  }
}
