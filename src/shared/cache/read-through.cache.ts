import { Logger } from '@nestjs/common';
import Redis from 'ioredis';
import { jittered } from './jitter';

/** What a writer leaves in a slot: readers treat it as a miss and must not fill it. */
const TOMBSTONE = '-';
/** Longer than a reader can take between loading a row and filling the slot. */
const TOMBSTONE_SECONDS = 30;

/**
 * The one read-through cache of rows in Redis, shared by every API process (end-user profiles,
 * API-key principals).
 *
 * Consistency: every writer of a cached field calls `invalidate` after its transaction commits
 * and before it answers. `invalidate` leaves a short-lived tombstone rather than deleting, and
 * readers only fill an empty slot (SET NX), so a reader that loaded the row before the commit
 * can never write the old value back: once a writer has answered, every reader sees the new
 * row. A slot lives `ttlSeconds()` at most (0 turns the cache off), which also bounds staleness
 * after writes made outside the service (SQL by hand: invalidate too, or wait).
 */
export class ReadThroughCache<T> {
  private readonly log: Logger;

  constructor(
    private readonly redis: Redis,
    private readonly namespace: string,
    private readonly ttlSeconds: () => number,
  ) {
    this.log = new Logger(`ReadThroughCache:${namespace}`);
  }

  /** The Redis key of `id`'s slot (for a caller that reads it with other keys, e.g. BearerPrefetch). */
  protected key(id: string): string {
    return `${this.namespace}:${id}`;
  }

  /** The cached value, or undefined (miss, tombstone, cache off, Redis unavailable). */
  async get(id: string): Promise<T | undefined> {
    if (!this.ttlSeconds()) return undefined;
    return this.decode(await this.redis.get(this.key(id)).catch(() => null));
  }

  /** A slot's raw value as `get` answers it (undefined for an empty slot, a tombstone, or the cache off). */
  protected decode(raw: string | null): T | undefined {
    if (!this.ttlSeconds()) return undefined;
    return raw && raw !== TOMBSTONE ? (JSON.parse(raw) as T) : undefined;
  }

  /** Fills an empty slot with a value loaded from PostgreSQL; never replaces a tombstone. */
  async fill(id: string, value: T): Promise<void> {
    const ttl = this.ttlSeconds();
    if (!ttl) return;
    // jittered: slots filled together (after a deploy or a flush) do not all expire together
    await this.redis.set(this.key(id), JSON.stringify(value), 'EX', jittered(ttl), 'NX').catch(() => undefined);
  }

  /** `get`, else `load` and `fill` (a load that finds nothing is not cached). */
  async read(id: string, load: () => Promise<T | undefined>): Promise<T | undefined> {
    const hit = await this.get(id);
    return hit !== undefined ? hit : this.fillFrom(id, load);
  }

  /** After a miss: `load`, and `fill` with what it found (nothing found is not cached). */
  async fillFrom(id: string, load: () => Promise<T | undefined>): Promise<T | undefined> {
    const value = await load();
    if (value !== undefined) await this.fill(id, value);
    return value;
  }

  /** After a commit that changed (or removed) these rows. */
  async invalidate(ids: readonly string[]): Promise<void> {
    if (!ids.length) return;
    const pipe = this.redis.pipeline();
    for (const id of ids) pipe.set(this.key(id), TOMBSTONE, 'EX', TOMBSTONE_SECONDS);
    const res = await pipe.exec().catch((e: Error) => [[e, null]] as [Error, null][]);
    const failed = res?.find(([err]) => err);
    if (failed) this.log.error(`invalidation of ${ids.length} slot(s) failed: ${failed[0]?.message}`);
  }
}
