import { Inject, Injectable } from '@nestjs/common';
import Redis from 'ioredis';
import { APP_CONFIG, AppConfig } from '../../config/config';
import { REDIS } from '../redis/redis.module';
import { ReadThroughCache } from './read-through.cache';

/** GET /v1/auth/me records activity (last_active_at, MAU) at most once a minute per user. */
const ACTIVITY_WINDOW_SECONDS = 60;

/**
 * End-user profiles as GET /v1/auth/me shows them (ReadThroughCache, USER_CACHE_TTL_SECONDS).
 * Every writer of a shown field (email, email_verified, is_anonymous, last_sign_in_at, the row
 * itself) calls `invalidate` after its commit.
 */
@Injectable()
export class UserProfileCache<T = unknown> extends ReadThroughCache<T> {
  constructor(
    @Inject(REDIS) private readonly client: Redis,
    @Inject(APP_CONFIG) config: AppConfig,
  ) {
    super(client, 'me', () => config.USER_CACHE_TTL_SECONDS);
  }

  /**
   * True at most once a minute per user (and on a user's first request of a UTC month), so the
   * activity statement runs only then; the statement re-checks in SQL, so a lost window (Redis
   * flushed or down) only costs one extra no-op statement.
   */
  async activityWindowOpen(userId: string): Promise<boolean> {
    const month = new Date().toISOString().slice(0, 7);
    const r = await this.client.set(`act:${month}:${userId}`, '1', 'EX', ACTIVITY_WINDOW_SECONDS, 'NX').catch(() => 'OK');
    return r === 'OK';
  }
}
