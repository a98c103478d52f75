import { Inject, Injectable, Logger } from '@nestjs/common';
import Redis from 'ioredis';
import { APP_CONFIG, AppConfig } from '../../config/config';
import { REDIS } from '../redis/redis.module';

/** What a writer leaves in a user's slot: readers treat it as a miss and must not fill it. */
const TOMBSTONE = '-';
/** Longer than a reader can take between loading a row and filling the slot. */
const TOMBSTONE_SECONDS = 30;
/** GET /v1/auth/me records activity (last_active_at, MAU) at most once a minute per user. */
const ACTIVITY_WINDOW_SECONDS = 60;

/**
 * Read-through cache of end-user profiles (GET /v1/auth/me) in Redis, shared by every API
 * process, so the hottest read does not reach PostgreSQL.
 *
 * Consistency: every writer of a field the profile shows (email, email_verified, is_anonymous,
 * last_sign_in_at, the row itself) calls `invalidate` after its transaction commits and before
 * it answers. `invalidate` leaves a short-lived tombstone rather than deleting, and readers only
 * fill an empty slot (SET NX), so a reader that loaded the row before the commit can never write
 * the old value back: once a writer has answered, every reader sees the new row. A slot lives
 * USER_CACHE_TTL_SECONDS at most (0 turns the cache off), which also bounds staleness after
 * writes made outside the service (SQL by hand: call `invalidate` or wait).
 */
@Injectable()
export class UserProfileCache {
  private readonly log = new Logger(UserProfileCache.name);

  constructor(
    @Inject(REDIS) private readonly redis: Redis,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  private get ttl(): number {
    return this.config.USER_CACHE_TTL_SECONDS;
  }

  /** The cached profile, or undefined (miss, tombstone, cache off, Redis unavailable). */
  async get<T>(userId: string): Promise<T | undefined> {
    if (!this.ttl) return undefined;
    const v = await this.redis.get(`me:${userId}`).catch(() => null);
    return v && v !== TOMBSTONE ? (JSON.parse(v) as T) : undefined;
  }

  /** Fills an empty slot with a profile loaded from PostgreSQL; never replaces a tombstone. */
  async fill(userId: string, profile: unknown): Promise<void> {
    if (!this.ttl) return;
    await this.redis.set(`me:${userId}`, JSON.stringify(profile), 'EX', this.ttl, 'NX').catch(() => undefined);
  }

  /** After a commit that changed what these users' profiles show (or removed the users). */
  async invalidate(userIds: readonly string[]): Promise<void> {
    if (!userIds.length) return;
    const pipe = this.redis.pipeline();
    for (const id of userIds) pipe.set(`me:${id}`, TOMBSTONE, 'EX', TOMBSTONE_SECONDS);
    const res = await pipe.exec().catch((e: Error) => [[e, null]] as [Error, null][]);
    const failed = res?.find(([err]) => err);
    if (failed) this.log.error(`profile cache invalidation failed for ${userIds.length} user(s): ${failed[0]?.message}`);
  }

  /**
   * True at most once a minute per user (and on a user's first request of a UTC month), so the
   * activity statement runs only then; the statement re-checks in SQL, so a lost window (Redis
   * flushed or down) only costs one extra no-op statement.
   */
  async activityWindowOpen(userId: string): Promise<boolean> {
    const month = new Date().toISOString().slice(0, 7);
    const r = await this.redis.set(`act:${month}:${userId}`, '1', 'EX', ACTIVITY_WINDOW_SECONDS, 'NX').catch(() => 'OK');
    return r === 'OK';
  }
}
