import { execAll } from '../../shared/redis/exec-all';
import { Inject, Injectable, Logger } from '@nestjs/common';
import { randomUUID } from 'crypto';
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
 * Present while the live set holds what PostgreSQL knows of the agent's live tokens: set by each
 * seed, for the longest a token lives. Missing (a Redis flush, or 900 s since the last seed), the
 * next acquire seeds the set from PostgreSQL first.
 */
const seededKey = (agentId: string) => `agent_tokens:{${agentId}}:seeded`;
/**
 * Set anew by every clear (kill-tokens, revoke), to a value that never repeats (a counter would
 * start again after a Redis flush and could land on the value a seed read): a seed that read
 * PostgreSQL before the clear writes nothing. It outlives any seed by far, then expires.
 */
const generationKey = (agentId: string) => `agent_tokens:{${agentId}}:gen`;
const GENERATION_TTL_SECONDS = 2 * AGENT_TOKEN_MAX_TTL_SECONDS;
/** Tokens per seed write: the arguments of one script call stay far below what Node and Redis take. */
const SEED_CHUNK = 5000;

/**
 * One part of a seed's write, only while the generation is the one read before the seed's
 * PostgreSQL read (no clear since, whose killed tokens the read may hold): adds the live tokens and
 * keeps the set for the seed's longest token; the last part also drops expired members and sets
 * the seeded marker for the longest a token lives. A clear between two parts empties the set, and
 * the next part sees the new generation.
 * KEYS: live set, seeded marker, generation. ARGV: generation read, now (s), marker seconds, last
 * part (1/0), the set's seconds to keep, then exp (s) and jti of each token. Answers 1 written, 0 a
 * clear came in between.
 */
const SEED_SCRIPT = `
if (redis.call('GET', KEYS[3]) or '0') ~= ARGV[1] then return 0 end
local now = tonumber(ARGV[2])
if #ARGV > 5 then
  for i = 6, #ARGV, 2 do redis.call('ZADD', KEYS[1], tonumber(ARGV[i]), ARGV[i + 1]) end
  local keep = tonumber(ARGV[5])
  if redis.call('TTL', KEYS[1]) < keep then redis.call('EXPIRE', KEYS[1], keep) end
end
if ARGV[4] == '1' then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
  redis.call('SET', KEYS[2], '1', 'EX', tonumber(ARGV[3]))
end
return 1`;

/**
 * Drops expired members, then adds the jti only while fewer than the maximum are live: one atomic
 * step, so N parallel exchanges with a maximum M add exactly M. A refusal answers the oldest live
 * token's exp and whether it is the first refusal of the event window (SET NX). Without the seeded
 * marker (unless ARGV[6] is 1: just seeded) it changes nothing and answers 2: seed first.
 * KEYS: live set, limited marker, seeded marker. ARGV: now (s), max, jti, exp (s), event window (s), seeded.
 */
const ACQUIRE_SCRIPT = `
if ARGV[6] ~= '1' and redis.call('EXISTS', KEYS[3]) == 0 then return {2, 0, 0} end
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
const SEED_COMMAND = 'authpAgentTokenSeed';
type Acquire = (live: string, limited: string, seeded: string, now: number, max: number, jti: string, exp: number, window: number, justSeeded: number) => Promise<[number, number, number]>;
type Seed = (live: string, seeded: string, generation: string, ...args: (string | number)[]) => Promise<number>;

export type SlotResult = { acquired: true } | { acquired: false; retryAfterSeconds: number; firstInWindow: boolean };

/**
 * spec 2.10 `agent_settings.max_concurrent_tokens`: how many unexpired tokens an agent holds at once
 * (across users). Redis only (a sorted set per agent); Redis unreachable is 503 (fail closed). A
 * kill-tokens or revoke of the agent clears the set (its tokens are no longer live); a token revoked
 * alone at /oauth/revoke leaves it (its slot frees at its exp). A maximum set on an agent that
 * already has live tokens counts them (seedFromIssued). After a Redis flush the set is seeded
 * again from PostgreSQL before the next slot is taken (the seeded marker is gone), so the forgotten
 * live tokens still count; only a token whose exchange was in flight during the flush, and whose
 * row commits after that seed read, is missed (one at most per exchange in flight). A seed never
 * brings back tokens a kill-tokens cleared meanwhile (the generation), and one that fails leaves
 * no marker, so the next acquire seeds again.
 */
@Injectable()
export class AgentTokenSlotsService {
  private readonly log = new Logger(AgentTokenSlotsService.name);
  private readonly acquireCmd: Acquire;
  private readonly seedCmd: Seed;

  constructor(
    @Inject(REDIS) private readonly redis: Redis,
    private readonly db: Db,
  ) {
    if (!(COMMAND in redis)) redis.defineCommand(COMMAND, { numberOfKeys: 3, lua: ACQUIRE_SCRIPT });
    if (!(SEED_COMMAND in redis)) redis.defineCommand(SEED_COMMAND, { numberOfKeys: 3, lua: SEED_SCRIPT });
    this.acquireCmd = (redis as unknown as Record<string, Acquire>)[COMMAND].bind(redis);
    this.seedCmd = (redis as unknown as Record<string, Seed>)[SEED_COMMAND].bind(redis);
  }

  /** Takes a slot for the token `jti` (expiring at `exp`, NumericDate) if fewer than `max` are live. */
  async acquire(agentId: string, max: number, jti: string, exp: number): Promise<SlotResult> {
    const unavailable = () => new AppError('server/unavailable', 'Agent token slots unavailable');
    const attempt = (justSeeded: number) =>
      this.acquireCmd(liveTokensKey(agentId), limitedKey(agentId), seededKey(agentId), Math.floor(Date.now() / 1000), max, jti, exp, CONCURRENCY_EVENT_WINDOW_SECONDS, justSeeded).catch(() => {
        throw unavailable();
      });
    let r = await attempt(0);
    // not seeded (a Redis flush, or the marker's 900 s are over): from PostgreSQL first, failing closed
    if (r[0] === 2) {
      if (!(await this.seedFromIssued(agentId))) throw unavailable();
      r = await attempt(1);
    }
    if (r[0] === 1) return { acquired: true };
    return { acquired: false, retryAfterSeconds: Math.max(1, Math.ceil(Number(r[1]) - Math.floor(Date.now() / 1000))), firstInWindow: r[2] === 1 };
  }

  /** Gives back the slot of a token that was not issued after all. Logged, not thrown (the slot frees at exp anyway). */
  async release(agentId: string, jti: string): Promise<void> {
    await this.redis.zrem(liveTokensKey(agentId), jti).catch((e: Error) => this.log.warn(`slot release failed for agent ${agentId}: ${e.message}`));
  }

  /**
   * After a PATCH that set `max_concurrent_tokens` committed, and by an acquire that finds no
   * seeded marker: the agent's live tokens issued while no maximum was set, or forgotten by a Redis
   * flush, join the set, so the maximum counts them. Read from
   * PostgreSQL (issuedAgentTokensSql: the tokens of the last 900 s, with their expiry); those issued before the agent's last
   * kill-tokens are dead and left out: a row created before the kill's `not_before` is a token
   * signed before it (iat <= signing <= the row's created_at), which the denylist refuses; a token
   * signed before the kill but written after it is kept (strict side). A token revoked alone at /oauth/revoke is kept, as acquire keeps it. Idempotent (ZADD of
   * the same jti and exp); members already in the set stay; the seeded marker is set for the
   * longest a token lives. The marker is deleted first and set again only by a seed that worked, so
   * after a failure (logged, not thrown: false; the PATCH has committed) the next acquire seeds
   * again. A clear (kill-tokens, revoke) between the read and the write makes the write a no-op
   * (generation), and the seed reads again, past the kill.
   */
  async seedFromIssued(agentId: string): Promise<boolean> {
    try {
      // a clear between the read below and the write: read again (its killed tokens left out then)
      for (let round = 0; round < 2; round++) {
        // the marker goes first: a seed that fails from here on leaves none, and the next acquire
        // seeds. A generation is made if there is none, so a Redis flush between two parts of the
        // write (which empties the set) is seen by the parts after it, as a clear is
        const [, [, generation]] = await execAll(
          this.redis.multi().set(generationKey(agentId), randomUUID(), 'EX', GENERATION_TTL_SECONDS, 'NX').get(generationKey(agentId)).del(seededKey(agentId)),
        );
        const rows = await this.db.query<{ jti: string; exp: number }>(
          `SELECT i.jti, floor(extract(epoch FROM i.expires_at))::int8 AS exp FROM (${issuedAgentTokensSql('$1', '$2')}) i
            WHERE i.created_at >= COALESCE((SELECT max(d.not_before) FROM agent_denylist d WHERE d.agent_client_id = $1), '-infinity')`,
          [agentId, AGENT_TOKEN_MAX_TTL_SECONDS],
          'agent_live_tokens_seed',
        );
        const now = Math.floor(Date.now() / 1000);
        const live = rows.map((r) => ({ jti: r.jti, exp: Number(r.exp) })).filter((r) => r.exp > now);
        // (a reduce: Math.max of 125,000 arguments overflows the stack)
        const keep = live.reduce((m, r) => Math.max(m, r.exp), 0) - now + 1;
        let written = true;
        for (let i = 0; written && (i === 0 || i < live.length); i += SEED_CHUNK) {
          const part = live.slice(i, i + SEED_CHUNK).flatMap((r) => [r.exp, r.jti]);
          const last = i + SEED_CHUNK >= live.length ? 1 : 0;
          const keys = [liveTokensKey(agentId), seededKey(agentId), generationKey(agentId)] as const;
          written = Number(await this.seedCmd(...keys, generation as string, now, AGENT_TOKEN_MAX_TTL_SECONDS, last, keep, ...part)) === 1;
        }
        if (written) return true;
      }
      this.log.warn(`live tokens seed for agent ${agentId} gave way to two clears in a row`);
      return false;
    } catch (e) {
      this.log.warn(`live tokens seed failed for agent ${agentId}: ${(e as Error).message}`);
      return false;
    }
  }

  /** After a kill-tokens or revoke committed: none of the agent's tokens is live any more. */
  async clear(agentId: string): Promise<void> {
    // the generation moves on: a seed that read PostgreSQL before the kill does not write its tokens back
    await execAll(this.redis.multi().set(generationKey(agentId), randomUUID(), 'EX', GENERATION_TTL_SECONDS).del(liveTokensKey(agentId))).catch((e: Error) =>
      this.log.warn(`slot clear failed for agent ${agentId}: ${e.message}`),
    );
  }
}
