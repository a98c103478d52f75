import { Inject, Injectable } from '@nestjs/common';
import Redis from 'ioredis';
import { AppError, RateLimitedError } from '../errors/app-error';
import { ErrorCode } from '../errors/error-codes';
import { execAll } from '../redis/exec-all';
import { REDIS } from '../redis/redis.module';
import { ThrottlerStorage, throttlerKeys } from './throttler-storage';

/**
 * The first refusal of a counter's block: SET NX of a marker that lives exactly as long as the
 * block (PX of the blocked key's remaining time), so one caller per block gets 1. KEYS: blocked
 * key, marker key (same hash slot). Answers 0 when the block has already ended.
 */
const FIRST_REFUSAL_SCRIPT = `
local left = redis.call('PTTL', KEYS[1])
if left <= 0 then return 0 end
if redis.call('SET', KEYS[2], '1', 'NX', 'PX', left) then return 1 end
return 0`;
const FIRST_REFUSAL_COMMAND = 'authpRateLimitFirstRefusal';
type FirstRefusal = (blocked: string, marker: string) => Promise<number>;

export interface LimitResult {
  allowed: boolean;
  count: number;
  retryAfterSeconds: number;
}

/**
 * The one rate limiter: fixed windows in Redis (the @nestjs/throttler Redis storage, run by
 * EVALSHA: see ThrottlerStorage), shared by every API process. Answers 429 with Retry-After (X-Service-Docs is added by the error filter).
 */
@Injectable()
export class RateLimitService {
  readonly storage: ThrottlerStorage;
  private readonly firstRefusalCmd: FirstRefusal;

  constructor(@Inject(REDIS) private readonly redis: Redis) {
    this.storage = new ThrottlerStorage(redis);
    if (!(FIRST_REFUSAL_COMMAND in redis)) redis.defineCommand(FIRST_REFUSAL_COMMAND, { numberOfKeys: 2, lua: FIRST_REFUSAL_SCRIPT });
    this.firstRefusalCmd = (redis as unknown as Record<string, FirstRefusal>)[FIRST_REFUSAL_COMMAND].bind(redis);
  }

  /**
   * After `hit` (or `hitInOrder`) refused `bucket:key`: whether this is the first refusal of the
   * counter's current block (the refusal window, which `retryAfterSeconds` counts down), so that
   * an event recorded "once per window" is recorded exactly once, whatever the counts (a limit
   * lowered mid-window leaves the count past limit + 1; a hit may be counted by a request that is
   * then refused for another reason). Call it only for a refused request: one more Redis round
   * trip, on refusals only. A block that ended in between answers false. Redis unreachable: 503.
   * `who`: for a counter several callers share (a subject token's exchanges by every agent), the
   * first refusal of each of them (each records its own event).
   */
  async firstRefusal(bucket: string, key: string, who?: string): Promise<boolean> {
    const { blocked } = throttlerKeys(`rl:${key}`, bucket);
    try {
      return (await this.firstRefusalCmd(blocked, who ? `${blocked}:first:${who}` : `${blocked}:first`)) === 1;
    } catch (cause) {
      throw new AppError('server/unavailable', 'Rate limiter unavailable', { cause });
    }
  }

  /** Counts one hit on `bucket:key`; not allowed once the count exceeds `limit` in the window. */
  async hit(bucket: string, key: string, limit: number, windowSeconds: number): Promise<LimitResult> {
    let r;
    try {
      r = await this.storage.increment(`rl:${key}`, windowSeconds * 1000, limit, windowSeconds * 1000, bucket);
    } catch (cause) {
      throw new AppError('server/unavailable', 'Rate limiter unavailable', { cause });
    }
    return {
      allowed: !r.isBlocked,
      count: r.totalHits,
      retryAfterSeconds: r.isBlocked ? Math.max(1, r.timeToBlockExpire) : 0,
    };
  }

  /**
   * Several limits in order, in one Redis round trip: each is counted only if every limit before
   * it let the request through (a refused request uses up nothing further down the list). A limit
   * not counted answers `allowed` unless it is blocked already (its remaining wait is reported).
   */
  async hitInOrder(limits: { bucket: string; key: string; limit: number; windowSeconds: number }[]): Promise<(LimitResult & { counted: boolean })[]> {
    let rs;
    try {
      rs = await this.storage.incrementInOrder(
        limits.map((l) => ({ key: `rl:${l.key}`, name: l.bucket, ttl: l.windowSeconds * 1000, limit: l.limit, blockDuration: l.windowSeconds * 1000 })),
      );
    } catch (cause) {
      throw new AppError('server/unavailable', 'Rate limiter unavailable', { cause });
    }
    return rs.map((r) => ({
      counted: r.counted,
      allowed: !r.isBlocked,
      count: r.totalHits,
      retryAfterSeconds: r.isBlocked ? Math.max(1, r.timeToBlockExpire) : 0,
    }));
  }

  /** `hit`, throwing 429 (with `code`) when over the limit; counted in authp_rate_limited_total by `bucket` (a fixed name). */
  async enforce(bucket: string, key: string, limit: number, windowSeconds: number, code: ErrorCode = 'rate_limit/exceeded'): Promise<void> {
    const r = await this.hit(bucket, key, limit, windowSeconds);
    if (!r.allowed) throw new RateLimitedError(bucket, r.retryAfterSeconds, code);
  }

  /** Current count and remaining window of a bucket without counting (failure counters). */
  async peek(bucket: string, keys: string[]): Promise<{ count: number; ttlSeconds: number }[]> {
    try {
      const pipe = this.redis.pipeline();
      for (const k of keys) {
        const { hits } = throttlerKeys(`rl:${k}`, bucket);
        pipe.get(hits).pttl(hits);
      }
      const res = await execAll(pipe);
      return keys.map((_, i) => ({
        count: Number(res[2 * i]?.[1] ?? 0) || 0,
        ttlSeconds: Math.max(1, Math.ceil(Number(res[2 * i + 1]?.[1] ?? 0) / 1000)),
      }));
    } catch (cause) {
      throw new AppError('server/unavailable', 'Rate limiter unavailable', { cause });
    }
  }

  /** Adds one hit to each counter without blocking (failure counters read back with `peek`). */
  async addHits(bucket: string, keys: string[], windowSeconds: number): Promise<void> {
    try {
      const pipe = this.redis.pipeline();
      for (const k of keys) {
        const { hits } = throttlerKeys(`rl:${k}`, bucket);
        pipe.incr(hits).pexpire(hits, windowSeconds * 1000, 'NX');
      }
      await execAll(pipe);
    } catch (cause) {
      throw new AppError('server/unavailable', 'Rate limiter unavailable', { cause });
    }
  }

  /**
   * Ends the running blocks of counters (a limit raised mid-window), keeping their counts: the
   * next hit is judged against the limit it brings, so a counter still over it blocks again. The
   * first-refusal marker goes with its block, so a new block records its event again.
   */
  async unblock(bucket: string, keys: string[]): Promise<void> {
    if (!keys.length) return;
    try {
      await this.redis.del(
        ...keys.flatMap((k) => {
          const { blocked } = throttlerKeys(`rl:${k}`, bucket);
          return [blocked, `${blocked}:first`];
        }),
      );
    } catch (cause) {
      throw new AppError('server/unavailable', 'Rate limiter unavailable', { cause });
    }
  }

  /** Clears counters (a successful sign-in clears that pair's failures). */
  async reset(bucket: string, keys: string[]): Promise<void> {
    if (!keys.length) return;
    await this.redis
      .del(
        ...keys.flatMap((k) => {
          const { hits, blocked } = throttlerKeys(`rl:${k}`, bucket);
          return [hits, blocked, `${blocked}:first`];
        }),
      )
      .catch(() => undefined);
  }
}
