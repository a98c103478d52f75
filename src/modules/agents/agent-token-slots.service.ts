import { execAll } from '../../shared/redis/exec-all';
import { Inject, Injectable, Logger } from '@nestjs/common';
import Redis from 'ioredis';
import { Db } from '../../shared/db/db.service';
import { AppError } from '../../shared/errors/app-error';
import { REDIS } from '../../shared/redis/redis.module';
import { AGENT_TOKEN_MAX_TTL_SECONDS } from '../oauth/oauth.constants';
import { issuedAgentTokensSql } from './issued-tokens.sql';

/** The window in which one refusal of an agent's concurrency limit is recorded (spec 6 events). */
export const CONCURRENCY_EVENT_WINDOW_SECONDS = 60;

/** An agent's live tokens: sorted set, member jti, score exp (the hash tag keeps both keys in one slot). */
export const liveTokensKey = (agentId: string) => `agent_tokens:{${agentId}}`;
const limitedKey = (agentId: string) => `agent_tokens:{${agentId}}:limited`;

/**
 * Drops expired members, then adds the jti only while fewer than the maximum are live: one atomic
 * step, so N parallel exchanges with a maximum M add exactly M. A refusal answers the oldest live
 * token's exp and whether it is the first refusal of the event window (SET NX).
 * KEYS: live set, limited marker. ARGV: now (s), max, jti, exp (s), event window (s).
 */
const ACQUIRE_SCRIPT = `
local now = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  local first = redis.call('SET', KEYS[2], '1', 'NX', 'EX', tonumber(ARGV[5]))
  return {0, tonumber(oldest[2]) or now, first and 1 or 0}
end
redis.call('ZADD', KEYS[1], tonumber(ARGV[4]), ARGV[3])
local ttl = redis.call('TTL', KEYS[1])
local want = tonumber(ARGV[4]) - now + 1
if ttl < want then redis.call('EXPIRE', KEYS[1], want) end
return {1, 0, 0}`;

const COMMAND = 'authpAgentTokenSlot';
type Acquire = (live: string, limited: string, now: number, max: number, jti: string, exp: number, window: number) => Promise<[number, number, number]>;

export type SlotResult = { acquired: true } | { acquired: false; retryAfterSeconds: number; firstInWindow: boolean };

/**
 * spec 2.10 `agent_settings.max_concurrent_tokens`: how many unexpired tokens an agent holds at once
 * (across users). Redis only (a sorted set per agent); Redis unreachable is 503 (fail closed). A
 * kill-tokens or revoke of the agent clears the set (its tokens are no longer live); a token revoked
 * alone at /oauth/revoke leaves it (its slot frees at its exp). A maximum set on an agent that
 * already has live tokens counts them (seedFromIssued). Known limit: a Redis flush forgets the
 * live tokens, so up to the maximum again may be issued while the forgotten ones still live (a
 * PATCH of the maximum seeds them again).
 */
@Injectable()
export class AgentTokenSlotsService {
  private readonly log = new Logger(AgentTokenSlotsService.name);
  private readonly acquireCmd: Acquire;

  constructor(
    @Inject(REDIS) private readonly redis: Redis,
    private readonly db: Db,
  ) {
    if (!(COMMAND in redis)) redis.defineCommand(COMMAND, { numberOfKeys: 2, lua: ACQUIRE_SCRIPT });
    this.acquireCmd = (redis as unknown as Record<string, Acquire>)[COMMAND].bind(redis);
  }

  /** Takes a slot for the token `jti` (expiring at `exp`, NumericDate) if fewer than `max` are live. */
  async acquire(agentId: string, max: number, jti: string, exp: number): Promise<SlotResult> {
    const now = Math.floor(Date.now() / 1000);
    let r: [number, number, number];
    try {
      r = await this.acquireCmd(liveTokensKey(agentId), limitedKey(agentId), now, max, jti, exp, CONCURRENCY_EVENT_WINDOW_SECONDS);
    } catch {
      throw new AppError('server/unavailable', 'Agent token slots unavailable');
    }
    if (r[0] === 1) return { acquired: true };
    return { acquired: false, retryAfterSeconds: Math.max(1, Math.ceil(Number(r[1]) - now)), firstInWindow: r[2] === 1 };
  }

  /** Gives back the slot of a token that was not issued after all. Logged, not thrown (the slot frees at exp anyway). */
  async release(agentId: string, jti: string): Promise<void> {
    await this.redis.zrem(liveTokensKey(agentId), jti).catch((e: Error) => this.log.warn(`slot release failed for agent ${agentId}: ${e.message}`));
  }

  /**
   * After a PATCH that set `max_concurrent_tokens` committed: the agent's live tokens issued while
   * no maximum was set (so never counted) join the set, so the new maximum counts them. Read from
   * PostgreSQL (issuedAgentTokensSql: the tokens of the last 900 s, with their expiry); those issued before the agent's last
   * kill-tokens are dead and left out: a row created before the kill's `not_before` is a token
   * signed before it (iat <= signing <= the row's created_at), which the denylist refuses; a token
   * signed before the kill but written after it is kept (strict side). A token revoked alone at /oauth/revoke is kept, as acquire keeps it. Idempotent (ZADD of
   * the same jti and exp); members already in the set stay. A failure is logged, not thrown: the
   * PATCH has committed; sending the same value again seeds again.
   */
  async seedFromIssued(agentId: string): Promise<void> {
    try {
      const rows = await this.db.query<{ jti: string; exp: number }>(
        `SELECT i.jti, floor(extract(epoch FROM i.expires_at))::int8 AS exp FROM (${issuedAgentTokensSql('$1', '$2')}) i
          WHERE i.created_at >= COALESCE((SELECT max(d.not_before) FROM agent_denylist d WHERE d.agent_client_id = $1), '-infinity')`,
        [agentId, AGENT_TOKEN_MAX_TTL_SECONDS],
        'agent_live_tokens_seed',
      );
      const now = Math.floor(Date.now() / 1000);
      const live = rows.map((r) => ({ jti: r.jti, exp: Number(r.exp) })).filter((r) => r.exp > now);
      if (!live.length) return;
      const maxExp = Math.max(...live.map((r) => r.exp));
      const key = liveTokensKey(agentId);
      await execAll(
        this.redis
          .multi()
          .zadd(key, ...live.flatMap((r) => [r.exp, r.jti]))
          .zremrangebyscore(key, '-inf', now)
          .expire(key, maxExp - now + 1, 'GT')
          .expire(key, maxExp - now + 1, 'NX'),
      );
    } catch (e) {
      this.log.warn(`live tokens seed failed for agent ${agentId}: ${(e as Error).message}`);
    }
  }

  /** After a kill-tokens or revoke committed: none of the agent's tokens is live any more. */
  async clear(agentId: string): Promise<void> {
    await this.redis.del(liveTokensKey(agentId)).catch((e: Error) => this.log.warn(`slot clear failed for agent ${agentId}: ${e.message}`));
  }
}
