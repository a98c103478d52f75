import { writeElseDelete } from '../../shared/redis/exec-all';
import { Inject, Injectable } from '@nestjs/common';
import Redis from 'ioredis';
import { APP_CONFIG, AppConfig } from '../../config/config';
import { RevocationCheck, RevocationSource } from '../../shared/auth/token-revocation.service';
import { AccessClaims } from '../../shared/crypto/jwt.service';
import { Db, Queryable } from '../../shared/db/db.service';
import { REDIS } from '../../shared/redis/redis.module';
import { AGENT_TOKEN_MAX_TTL_SECONDS, revokedJtiKey, revokedJtiTenantKey } from './oauth.constants';

/** What `revoked:jti:<jti>` holds: revoked, or PostgreSQL said it was not when read. */
const JTI_REVOKED = '1';
const JTI_LIVE = '0';

/** Seconds a jti's answer stays cached: until its token has expired (and a minute of clock skew). */
const ttlFor = (claims: AccessClaims) => Math.max(60, claims.exp - Math.floor(Date.now() / 1000) + 60);

/**
 * Access tokens revoked through POST /oauth/revoke (RFC 7009): refused by the bearer guard and
 * introspection until they expire. PostgreSQL (`revoked_access_tokens`) is the source of truth;
 * Redis caches the answer per jti, as TokenRevocationService does for sessions: the revoker sets
 * "revoked" unconditionally after its commit, a reader that found the key absent asks PostgreSQL
 * once and fills only an empty slot (SET NX), so neither a race nor a Redis that lost its data
 * ever brings a revoked token back.
 *
 * Most tenants never revoke an access token, and every new token would otherwise cost one
 * PostgreSQL read on its first use. So Redis also holds, per tenant, whether the tenant has any
 * revoked token that has not expired (`revoked:jti-tenant:<id>`), under the same protocol (the
 * revoker sets "yes" after its commit; a reader fills "no" only into an empty slot): while it
 * says "no", a token's first use reads nothing more than the MGET the guard makes anyway.
 */
@Injectable()
export class JtiRevocationSource implements RevocationSource {
  constructor(
    private readonly db: Db,
    @Inject(REDIS) private readonly redis: Redis,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  /** How long a tenant's answer stays cached: longer than any token it covers lives. */
  private get tenantTtlSeconds(): number {
    return Math.max(this.config.ACCESS_TOKEN_TTL_SECONDS, AGENT_TOKEN_MAX_TTL_SECONDS) + 60;
  }

  keysFor(claims: AccessClaims): RevocationCheck[] {
    if (typeof claims.jti !== 'string' || !claims.jti || claims.jti.length > 64 || typeof claims.tenant_id !== 'string') return [];
    return [
      {
        key: revokedJtiKey(claims.jti),
        reason: 'token_revoked',
        refuses: (v) => v !== JTI_LIVE,
        onMiss: (c) => this.revokedInDb(c),
        unless: { key: revokedJtiTenantKey(claims.tenant_id), value: JTI_LIVE, onMiss: (c) => this.tenantHasRevocations(c.tenant_id) },
      },
    ];
  }

  /**
   * Records the revocation in the caller's transaction (call `cacheRevoked` once it committed);
   * false when the token already was revoked (an earlier or a parallel revocation won).
   */
  async revoke(tx: Queryable, tenantId: string, claims: AccessClaims): Promise<boolean> {
    const { rowCount } = await tx.exec(
      `INSERT INTO revoked_access_tokens (jti, tenant_id, expires_at) VALUES ($1, $2, to_timestamp($3)) ON CONFLICT (jti) DO NOTHING`,
      [claims.jti, tenantId, claims.exp],
    );
    return rowCount > 0;
  }

  /**
   * After the commit (and before answering): the token is refused at once everywhere. A Redis that
   * refuses the marks (out of memory under noeviction) still takes deletes: the cached answers
   * ("not revoked", "the tenant has none") are deleted instead, so the next check asks PostgreSQL,
   * which says revoked. A Redis that takes neither throws (503; the repeat tells it).
   */
  async cacheRevoked(claims: AccessClaims): Promise<void> {
    const [gate, jti] = [revokedJtiTenantKey(claims.tenant_id), revokedJtiKey(claims.jti)];
    await writeElseDelete(this.redis, (client) => client.multi().set(gate, JTI_REVOKED, 'EX', this.tenantTtlSeconds).set(jti, JTI_REVOKED, 'EX', ttlFor(claims)), [gate, jti]);
  }

  private async revokedInDb(claims: AccessClaims): Promise<boolean> {
    const [row] = await this.db.query<{ revoked: boolean }>(
      `SELECT EXISTS (SELECT 1 FROM revoked_access_tokens WHERE jti = $1) AS revoked`,
      [claims.jti],
      'jti_revoked',
    );
    // PostgreSQL answered: a Redis refusing the cache fill (out of memory) changes nothing but the next read
    await this.redis.set(revokedJtiKey(claims.jti), row.revoked ? JTI_REVOKED : JTI_LIVE, 'EX', ttlFor(claims), 'NX').catch(() => undefined);
    return row.revoked;
  }

  /** Whether the tenant has a revoked token not yet expired (cached for the next tokens, never over "yes"). */
  private async tenantHasRevocations(tenantId: string): Promise<boolean> {
    const [row] = await this.db.query<{ any: boolean }>(
      `SELECT EXISTS (SELECT 1 FROM revoked_access_tokens WHERE tenant_id = $1 AND expires_at > now()) AS any`,
      [tenantId],
      'jti_revoked_tenant',
    );
    await this.redis.set(revokedJtiTenantKey(tenantId), row.any ? JTI_REVOKED : JTI_LIVE, 'EX', this.tenantTtlSeconds, 'NX').catch(() => undefined);
    return row.any;
  }
}
