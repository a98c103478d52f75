import { Inject, Injectable } from '@nestjs/common';
import Redis from 'ioredis';
import { RevocationCheck, RevocationSource } from '../../shared/auth/token-revocation.service';
import { AccessClaims } from '../../shared/crypto/jwt.service';
import { Db, Queryable } from '../../shared/db/db.service';
import { REDIS } from '../../shared/redis/redis.module';
import { revokedJtiKey } from './oauth.constants';

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
 */
@Injectable()
export class JtiRevocationSource implements RevocationSource {
  constructor(
    private readonly db: Db,
    @Inject(REDIS) private readonly redis: Redis,
  ) {}

  keysFor(claims: AccessClaims): RevocationCheck[] {
    if (typeof claims.jti !== 'string' || !claims.jti || claims.jti.length > 64) return [];
    return [{ key: revokedJtiKey(claims.jti), reason: 'token_revoked', refuses: (v) => v !== JTI_LIVE, onMiss: (c) => this.revokedInDb(c) }];
  }

  /** Records the revocation in the caller's transaction; call `cacheRevoked` once it committed. */
  async revoke(tx: Queryable, tenantId: string, claims: AccessClaims): Promise<void> {
    await tx.query(
      `INSERT INTO revoked_access_tokens (jti, tenant_id, expires_at) VALUES ($1, $2, to_timestamp($3)) ON CONFLICT (jti) DO NOTHING`,
      [claims.jti, tenantId, claims.exp],
    );
  }

  /** After the commit (and before answering): the token is refused at once everywhere. */
  async cacheRevoked(claims: AccessClaims): Promise<void> {
    await this.redis.set(revokedJtiKey(claims.jti), JTI_REVOKED, 'EX', ttlFor(claims));
  }

  private async revokedInDb(claims: AccessClaims): Promise<boolean> {
    const [row] = await this.db.query<{ revoked: boolean }>(
      `SELECT EXISTS (SELECT 1 FROM revoked_access_tokens WHERE jti = $1) AS revoked`,
      [claims.jti],
      'jti_revoked',
    );
    await this.redis.set(revokedJtiKey(claims.jti), row.revoked ? JTI_REVOKED : JTI_LIVE, 'EX', ttlFor(claims), 'NX');
    return row.revoked;
  }
}
