import { AppError } from '../errors/app-error';
import { writeElseDelete } from '../redis/exec-all';
import { randomBytes } from 'crypto';
import { Logger } from '@nestjs/common';
import Redis from 'ioredis';
import { jittered } from './jitter';

/** A writer's mark in a slot: this prefix and a nonce of its own. Readers treat it as a miss. */
const TOMBSTONE = '-';
/** Longer than a reader can take between loading a row and filling the slot. */
const TOMBSTONE_SECONDS = 30;
/**
 * Replaces the tombstone a reader saw before it loaded (KEYS[1] still holds ARGV[1]) with the
 * value it loaded (ARGV[2]), living ARGV[3] ms or what the tombstone had left, whichever is
 * longer: a reader that saw the slot empty before the write still finds it taken when it fills.
 */
const REPLACE_TOMBSTONE = `if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local ttl = tonumber(ARGV[3])
local left = redis.call('PTTL', KEYS[1])
if left > ttl then ttl = left end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ttl)
return 1`;
/** REPLACE_TOMBSTONE as a client command (EVALSHA through ioredis `defineCommand`, as the rate limiter's scripts). */
const REPLACE_TOMBSTONE_COMMAND = 'authpCacheReplaceTombstone';
type ReplaceTombstone = (key: string, tombstone: string, value: string, ttlMs: number) => Promise<number>;

/**
 * What a read found in a slot: the value, or on a miss the guard a fill needs (null: the slot was
 * empty; else the tombstone that was there, which only that fill may replace).
 */
export interface Slot<T> {
  value?: T;
  guard: string | null;
}

/**
 * The one read-through cache of rows in Redis, shared by every API process (end-user profiles,
 * API-key principals, agent clients).
 *
 * Consistency: every writer of a cached field calls `invalidate` after its transaction commits
 * and before it answers. `invalidate` leaves a tombstone with a nonce of its own rather than
 * deleting. A reader fills only what it saw before it loaded the row: an empty slot (SET NX), or
 * the very tombstone it read (compare and set). A reader that loaded the row before the commit
 * saw the slot empty or an older tombstone, so its fill finds the slot changed and writes
 * nothing: once a writer has answered, every reader sees the new row. A reader that saw this
 * writer's tombstone loaded after the commit, so it refills the slot at once; a busy tenant does
 * not read PostgreSQL on every request until the tombstone expires. A slot lives `ttlSeconds()`
 * at most (0 turns the cache off), which also bounds staleness after writes made outside the
 * service (SQL by hand: invalidate too, or wait).
 */
/**
 * For a committed change that must hold in every API process before it is answered (a revoked
 * key, a narrower setting, a disabled client): `told` is what `invalidate` answered. When Redis
 * took neither the tombstones nor the deletes, the other processes would act on their cached rows
 * for up to the cache's TTL, so the change is answered 503 server/unavailable instead of as done:
 * it is committed, and sending it again (every such write invalidates again on a repeat) tells
 * the caches then.
 */
export function requireInvalidated(told: boolean): void {
  if (!told) throw new AppError('server/unavailable', 'The change is saved, but not every server could be told yet: send it again');
}

export class ReadThroughCache<T> {
  private readonly log: Logger;
  private readonly replaceTombstone: ReplaceTombstone;

  constructor(
    private readonly redis: Redis,
    private readonly namespace: string,
    private readonly ttlSeconds: () => number,
    /** false: invalidations do not wait for REDIS_REVOCATION_REPLICAS (no revocation rides on them) */
    private readonly replicated = true,
  ) {
    this.log = new Logger(`ReadThroughCache:${namespace}`);
    if (!(REPLACE_TOMBSTONE_COMMAND in redis)) redis.defineCommand(REPLACE_TOMBSTONE_COMMAND, { numberOfKeys: 1, lua: REPLACE_TOMBSTONE });
    this.replaceTombstone = (redis as unknown as Record<string, ReplaceTombstone>)[REPLACE_TOMBSTONE_COMMAND].bind(redis);
  }

  /** The Redis key of `id`'s slot (for a caller that reads it with other keys, e.g. BearerPrefetch). */
  protected key(id: string): string {
    return `${this.namespace}:${id}`;
  }

  /** What `id`'s slot holds (a miss also when the cache is off or Redis unavailable). */
  async lookup(id: string): Promise<Slot<T>> {
    if (!this.ttlSeconds()) return { guard: null };
    return this.slotOf(await this.redis.get(this.key(id)).catch(() => null));
  }

  /** A slot's raw value as `lookup` answers it. */
  protected slotOf(raw: string | null): Slot<T> {
    if (!this.ttlSeconds() || raw === null) return { guard: null };
    if (raw.startsWith(TOMBSTONE)) return { guard: raw };
    try {
      return { value: JSON.parse(raw) as T, guard: null };
    } catch {
      // not JSON (written by hand, or cut short): a miss, and the fill replaces exactly that value
      return { guard: raw };
    }
  }

  /**
   * Fills the slot with a value loaded from PostgreSQL after a `lookup` that missed: only if it
   * still holds what that lookup saw (`guard`), so a stale load never replaces a newer write's
   * tombstone.
   */
  async fill(id: string, value: T, guard: string | null): Promise<void> {
    const ttl = this.ttlSeconds();
    if (!ttl) return;
    // jittered: slots filled together (after a deploy or a flush) do not all expire together
    const json = JSON.stringify(value);
    const filled = guard === null
      ? this.redis.set(this.key(id), json, 'EX', jittered(ttl), 'NX')
      : this.replaceTombstone(this.key(id), guard, json, jittered(ttl) * 1000);
    await filled.catch(() => undefined);
  }

  /** `lookup`, else `load` and `fill` (a load that finds nothing is not cached). */
  async read(id: string, load: () => Promise<T | undefined>): Promise<T | undefined> {
    const slot = await this.lookup(id);
    return slot.value !== undefined ? slot.value : this.fillFrom(id, load, slot.guard);
  }

  /** After a `lookup` that missed with `guard`: `load`, and `fill` with what it found (nothing found is not cached). */
  async fillFrom(id: string, load: () => Promise<T | undefined>, guard: string | null): Promise<T | undefined> {
    const value = await load();
    if (value !== undefined) await this.fill(id, value, guard);
    return value;
  }

  /** After a commit that changed (or removed) these rows; false when Redis could not be told (logged). */
  async invalidate(ids: readonly string[]): Promise<boolean> {
    if (!ids.length) return true;
    const tombstones = (client: Redis) => {
      const pipe = client.pipeline();
      for (const id of ids) pipe.set(this.key(id), TOMBSTONE + randomBytes(9).toString('base64url'), 'EX', TOMBSTONE_SECONDS);
      return pipe;
    };
    // out of memory, the slots are deleted instead: the next read loads the row
    return writeElseDelete(this.redis, tombstones, ids.map((id) => this.key(id)), { replicated: this.replicated })
      .then(
        () => true,
        (e: Error) => {
          this.log.error(`invalidation of ${ids.length} slot(s) failed: ${e.message}`);
          return false;
        },
      );
  }
}
