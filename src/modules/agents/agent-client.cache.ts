import { Inject, Injectable } from '@nestjs/common';
import Redis from 'ioredis';
import { APP_CONFIG, AppConfig } from '../../config/config';
import { ReadThroughCache } from '../../shared/cache/read-through.cache';
import type { Queryable } from '../../shared/db/db.service';
import { REDIS } from '../../shared/redis/redis.module';
import type { AgentClientRow } from './agents.service';

/**
 * Agent clients as the token endpoint authenticates them (the row with its tenant's tier and user
 * scopes), by client id (ReadThroughCache, AGENT_CLIENT_CACHE_TTL_SECONDS). Writers, after their
 * commit: update, rotate-secret, disable and revoke of the agent, and a change of the tenant's tier
 * or user scopes (`invalidateTenant`). The issuing statement of a token exchange re-reads what must never be
 * stale (revoked, secret, grant, disabled) in PostgreSQL anyway. The value holds the SHA-256 of
 * the client secret, as the table does: the secret is 256 random bits, so the hash reveals nothing.
 */
@Injectable()
export class AgentClientCache extends ReadThroughCache<AgentClientRow> {
  constructor(@Inject(REDIS) redis: Redis, @Inject(APP_CONFIG) config: AppConfig) {
    super(redis, 'agentclient', () => config.AGENT_CLIENT_CACHE_TTL_SECONDS);
  }

  /** Every agent of a tenant (its tier and user scopes are in each row). */
  async invalidateTenant(db: Queryable, tenantId: string): Promise<boolean> {
    const rows = await db.query<{ id: string }>(`SELECT id FROM agent_clients WHERE tenant_id = $1`, [tenantId]);
    return this.invalidate(rows.map((r) => r.id));
  }
}
