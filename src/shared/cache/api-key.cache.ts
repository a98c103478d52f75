import { Inject, Injectable } from '@nestjs/common';
import Redis from 'ioredis';
import { APP_CONFIG, AppConfig } from '../../config/config';
import type { ApiKeyPrincipal } from '../auth/auth-context';
import type { Queryable } from '../db/db.service';
import { REDIS } from '../redis/redis.module';
import { ReadThroughCache } from './read-through.cache';

/**
 * API-key principals (the key and the tenant settings it carries) by key hash
 * (ReadThroughCache, API_KEY_CACHE_TTL_SECONDS). Writers: revoking a key, and every change to a
 * tenant field the principal carries (tier, anonymous sign-ins, default role) through
 * `invalidateTenant`, after the commit.
 */
@Injectable()
export class ApiKeyCache extends ReadThroughCache<ApiKeyPrincipal> {
  constructor(@Inject(REDIS) redis: Redis, @Inject(APP_CONFIG) config: AppConfig) {
    super(redis, 'apikey', () => config.API_KEY_CACHE_TTL_SECONDS);
  }

  /** Every key of a tenant (revoked ones need no slot: a revoked key's slot was tombstoned). */
  async invalidateTenant(db: Queryable, tenantId: string): Promise<boolean> {
    const rows = await db.query<{ key_hash: string }>(`SELECT key_hash FROM api_keys WHERE tenant_id = $1 AND revoked_at IS NULL`, [tenantId]);
    return this.invalidate(rows.map((r) => r.key_hash));
  }
}
