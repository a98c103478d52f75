import { Inject, Injectable } from '@nestjs/common';
import Redis from 'ioredis';
import { APP_CONFIG, AppConfig } from '../../config/config';
import { AccessClaims } from '../crypto/jwt.service';
import { AppError } from '../errors/app-error';
import { REDIS } from '../redis/redis.module';

/** One Redis key the bearer guard tests, with the reason it answers when the token is refused. */
export interface RevocationCheck {
  key: string;
  reason: string;
  /** whether the cached value refuses this token (default: any value does), e.g. comparing `iat` */
  refuses?: (value: string, claims: AccessClaims) => boolean;
  /** on a cache miss, asks the source of truth (a Redis flush must never un-revoke) */
  onMiss?: (claims: AccessClaims) => Promise<boolean>;
}

/** Extra revocation checks other modules add (the agent denylist): Redis keys to test, and the reason. */
export interface RevocationSource {
  keysFor(claims: AccessClaims): RevocationCheck[];
}

/**
 * Access tokens are stateless, so an ended session (logout, reuse detection) is remembered in
 * Redis for one access-token lifetime; the bearer guard checks it in one pipelined round trip.
 */
@Injectable()
export class TokenRevocationService {
  private readonly sources: RevocationSource[] = [];

  constructor(
    @Inject(REDIS) private readonly redis: Redis,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  register(source: RevocationSource): void {
    this.sources.push(source);
  }

  async markSessionsRevoked(sessionIds: string[]): Promise<void> {
    if (!sessionIds.length) return;
    const pipe = this.redis.pipeline();
    for (const sid of sessionIds) pipe.set(`revoked:sid:${sid}`, '1', 'EX', this.config.ACCESS_TOKEN_TTL_SECONDS + 60);
    await pipe.exec();
  }

  /** The reason a verified token is no longer accepted, or null. Fails closed when Redis is down. */
  async revokedReason(claims: AccessClaims): Promise<string | null> {
    const checks: RevocationCheck[] = [];
    if (claims.sid) checks.push({ key: `revoked:sid:${claims.sid}`, reason: 'session_revoked' });
    for (const s of this.sources) checks.push(...s.keysFor(claims));
    if (!checks.length) return null;
    let values: (string | null)[];
    try {
      values = await this.redis.mget(...checks.map((c) => c.key));
    } catch {
      throw new AppError('server/unavailable', 'Token revocation state unavailable');
    }
    const misses: RevocationCheck[] = [];
    for (let i = 0; i < checks.length; i++) {
      const c = checks[i];
      const v = values[i];
      if (v !== null && (!c.refuses || c.refuses(v, claims))) return c.reason;
      if (v === null && c.onMiss) misses.push(c);
    }
    if (!misses.length) return null;
    let answers: boolean[];
    try {
      answers = await Promise.all(misses.map((c) => c.onMiss!(claims)));
    } catch (e) {
      if (e instanceof AppError) throw e;
      throw new AppError('server/unavailable', 'Token revocation state unavailable');
    }
    const refused = answers.findIndex(Boolean);
    return refused >= 0 ? misses[refused].reason : null;
  }
}
