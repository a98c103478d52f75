import { Inject, Injectable } from '@nestjs/common';
import Redis from 'ioredis';
import { APP_CONFIG, AppConfig } from '../../config/config';
import { BearerPrefetchSource, Prefetched } from '../auth/bearer-prefetch';
import { AccessClaims } from '../crypto/jwt.service';
import { REDIS } from '../redis/redis.module';
import { jittered } from './jitter';
import { ReadThroughCache, Slot } from './read-through.cache';

/**
 * GET /v1/auth/me records activity (last_active_at, MAU) at most once a minute per user: each
 * window lasts 60-75 s (jittered upwards, so users first seen together do not all write again in
 * the same instant, and never more often than once a minute).
 */
const ACTIVITY_WINDOW_SECONDS = 75;

/**
 * End-user profiles as GET /v1/auth/me shows them (ReadThroughCache, USER_CACHE_TTL_SECONDS).
 * Every writer of a shown field (email, email_verified, is_anonymous, last_sign_in_at, the row
 * itself) calls `invalidate` after its commit.
 */
@Injectable()
export class UserProfileCache<T = unknown> extends ReadThroughCache<T> implements BearerPrefetchSource {
  constructor(
    @Inject(REDIS) private readonly client: Redis,
    @Inject(APP_CONFIG) config: AppConfig,
  ) {
    // a profile slot revokes nothing (ended sessions are refused by their own marks), so its
    // invalidations at every sign-in are not held up by a missing replica
    super(client, 'me', () => config.USER_CACHE_TTL_SECONDS, false);
  }

  /**
   * True at most once a minute per user (and on a user's first request of a UTC month), so the
   * activity statement runs only then; the statement re-checks in SQL, so a lost window (Redis
   * flushed or down) only costs one extra no-op statement.
   */
  async activityWindowOpen(userId: string, prefetched?: Prefetched): Promise<boolean> {
    const key = activityKey(userId);
    // the guard saw the window key: closed, no write needed (absent: claim it, as another request may)
    if (prefetched?.get(key)) return false;
    const r = await this.client.set(key, '1', 'EX', jittered(ACTIVITY_WINDOW_SECONDS), 'NX').catch(() => 'OK');
    return r === 'OK';
  }

  /**
   * GET /v1/auth/me's reads, for the bearer guard to make with its revocation check (one Redis
   * round trip per call): the profile slot and the activity window, both read-only.
   */
  prefetchKeys(claims: AccessClaims): string[] {
    return [this.key(claims.sub), activityKey(claims.sub)];
  }

  /** `lookup`, answered from what the bearer guard read when it read the slot. */
  async lookupPrefetched(userId: string, prefetched?: Prefetched): Promise<Slot<T>> {
    const key = this.key(userId);
    return prefetched?.has(key) ? this.slotOf(prefetched.get(key) ?? null) : this.lookup(userId);
  }
}

/** The activity window of a user in the current UTC month (the month's first activity counts for MAU). */
function activityKey(userId: string): string {
  return `act:${utcMonth()}:${userId}`;
}

/** The current UTC month as YYYY-MM, recomputed only when a month ends (read twice per GET /me). */
let month = { label: '', until: 0 };
function utcMonth(now = Date.now()): string {
  if (now >= month.until) {
    const d = new Date(now);
    month = { label: d.toISOString().slice(0, 7), until: Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1) };
  }
  return month.label;
}
