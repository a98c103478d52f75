import { Inject, Injectable } from '@nestjs/common';
import Redis from 'ioredis';
import { APP_CONFIG, AppConfig } from '../../config/config';
import { AccessClaims } from '../crypto/jwt.service';
import { Db } from '../db/db.service';
import { AppError } from '../errors/app-error';
import { writeElseDelete } from '../redis/exec-all';
import { REDIS } from '../redis/redis.module';

/** What `revoked:sid:<id>` holds: the session ended, or PostgreSQL said it was live when read. */
const SESSION_REVOKED = '1';
const SESSION_LIVE = '0';

/** One Redis key the bearer guard tests, with the reason it answers when the token is refused. */
export interface RevocationCheck {
  key: string;
  reason: string;
  /** whether the cached value refuses this token (default: any value does), e.g. comparing `iat` */
  refuses?: (value: string, claims: AccessClaims) => boolean;
  /** on a cache miss, asks the source of truth (a Redis flush must never un-revoke) */
  onMiss?: (claims: AccessClaims) => Promise<boolean>;
  /**
   * A broader answer read in the same MGET: when `key` holds `value` (e.g. "this tenant has no
   * revoked token"), a miss of this check's own key is answered without `onMiss`. When `key` is
   * absent too, `onMiss` of the gate asks the source of truth (and caches it): false ends the
   * check, true goes on to this check's own `onMiss`. A value in this check's own key always
   * decides, whatever the gate says.
   */
  unless?: { key: string; value: string; onMiss: (claims: AccessClaims) => Promise<boolean> };
}

/** Extra revocation checks other modules add (the agent denylist): Redis keys to test, and the reason. */
export interface RevocationSource {
  keysFor(claims: AccessClaims): RevocationCheck[];
}

/**
 * Access tokens are stateless, so the bearer guard asks whether the token's session has ended
 * (logout, reuse detection, password change, revocation); for an agent token, the session of its
 * subject token (`subject_sid`). The answer for a session lives in
 * Redis, `revoked:sid:<id>`, and is checked in one pipelined round trip with the other checks.
 * PostgreSQL stays the source of truth: on a miss (a new session, or Redis lost its keys) the
 * session row is read and its state cached. Writers set "ended" unconditionally after their
 * commit; readers fill only an empty slot (SET NX), so a reader that read the row before a
 * revocation committed can never cache "live" over it, and a Redis flush never un-revokes.
 */
@Injectable()
export class TokenRevocationService {
  private readonly sources: RevocationSource[] = [];

  constructor(
    @Inject(REDIS) private readonly redis: Redis,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly db: Db,
  ) {}

  /** How long a session's state stays cached (a revocation made by hand in SQL shows after it). */
  get ttlSeconds(): number {
    return this.config.ACCESS_TOKEN_TTL_SECONDS + 60;
  }

  /** PostgreSQL's answer for a session not in Redis, cached for the next calls (never over "ended"). */
  private async sessionEnded(sid: string): Promise<boolean> {
    const [row] = await this.db.query<{ ended: boolean }>(
      `SELECT revoked_at IS NOT NULL AS ended FROM user_sessions WHERE id = $1`,
      [sid],
      'session_state',
    );
    // no row: the session (or its user) was deleted
    const ended = !row || row.ended;
    // PostgreSQL answered: a Redis refusing the cache fill (out of memory) changes nothing but the next read
    await this.redis.set(`revoked:sid:${sid}`, ended ? SESSION_REVOKED : SESSION_LIVE, 'EX', this.ttlSeconds, 'NX').catch(() => undefined);
    return ended;
  }

  register(source: RevocationSource): void {
    this.sources.push(source);
  }

  /**
   * After the commit that ended these sessions (and before answering): their tokens are refused at
   * once. A Redis that refuses the "ended" marks (out of memory under noeviction) still takes
   * deletes, which free memory: the cached states are deleted instead, so the next check reads
   * PostgreSQL, which says ended. When Redis takes neither (unreachable, a replica after a
   * failover, NOREPLICAS), 503 server/unavailable: a session cached as live would keep its access
   * tokens working until the cache expired, so the caller must not answer as if it had ended them.
   */
  async markSessionsRevoked(sessionIds: string[]): Promise<void> {
    if (!sessionIds.length) return;
    const keys = sessionIds.map((sid) => `revoked:sid:${sid}`);
    const marks = (client: Redis) => {
      const pipe = client.pipeline();
      for (const key of keys) pipe.set(key, SESSION_REVOKED, 'EX', this.ttlSeconds);
      return pipe;
    };
    await writeElseDelete(this.redis, marks, keys).catch((cause: unknown) => {
      throw new AppError('server/unavailable', 'Token revocation state unavailable', { cause });
    });
  }

  /** Deletes the cached states of these sessions (marks written for a change that then rolled back). */
  async forgetSessionMarks(sessionIds: string[]): Promise<void> {
    if (sessionIds.length) await this.redis.del(...sessionIds.map((sid) => `revoked:sid:${sid}`));
  }

  /** The reason a verified token is no longer accepted, or null. Fails closed when Redis is down. */
  async revokedReason(claims: AccessClaims): Promise<string | null> {
    return (await this.check(claims)).reason;
  }

  /**
   * `revokedReason`, with `extraKeys` read in the same MGET (one round trip) and their values
   * returned in order (null for an absent key). They are read whatever the answer; callers must
   * not use them for a refused token.
   */
  async check(claims: AccessClaims, extraKeys: readonly string[] = []): Promise<{ reason: string | null; extra: (string | null)[] }> {
    const checks: RevocationCheck[] = [];
    // an agent token ends with the session of the token it was exchanged for
    const sid = claims.sid ?? (claims.act ? claims.subject_sid : undefined);
    if (sid)
      checks.push({
        key: `revoked:sid:${sid}`,
        reason: 'session_revoked',
        refuses: (v) => v !== SESSION_LIVE,
        onMiss: () => this.sessionEnded(sid),
      });
    for (const s of this.sources) checks.push(...s.keysFor(claims));
    if (!checks.length && !extraKeys.length) return { reason: null, extra: [] };
    // the checks' keys, then their gates' keys, then the caller's extra keys: one MGET
    const gates = checks.filter((c) => c.unless).map((c) => c.unless!.key);
    let values: (string | null)[];
    try {
      values = await this.redis.mget(...checks.map((c) => c.key), ...gates, ...extraKeys);
    } catch (cause) {
      throw new AppError('server/unavailable', 'Token revocation state unavailable', { cause });
    }
    const extra = values.slice(checks.length + gates.length);
    return { reason: await this.reasonFrom(checks, values, claims), extra };
  }

  private async reasonFrom(checks: RevocationCheck[], values: (string | null)[], claims: AccessClaims): Promise<string | null> {
    const misses: { check: RevocationCheck; ask: () => Promise<boolean> }[] = [];
    let gate = checks.length;
    for (let i = 0; i < checks.length; i++) {
      const c = checks[i];
      const v = values[i];
      const g = c.unless ? values[gate++] : undefined;
      if (v !== null && (!c.refuses || c.refuses(v, claims))) return c.reason;
      if (v !== null || !c.onMiss) continue;
      const onMiss = c.onMiss;
      if (!c.unless) misses.push({ check: c, ask: () => onMiss(claims) });
      else if (g !== c.unless.value) {
        const unless = c.unless;
        misses.push({ check: c, ask: async () => (g === null && !(await unless.onMiss(claims)) ? false : onMiss(claims)) });
      }
    }
    if (!misses.length) return null;
    let answers: boolean[];
    try {
      answers = await Promise.all(misses.map((m) => m.ask()));
    } catch (e) {
      if (e instanceof AppError) throw e;
      throw new AppError('server/unavailable', 'Token revocation state unavailable', { cause: e });
    }
    const refused = answers.findIndex(Boolean);
    return refused >= 0 ? misses[refused].check.reason : null;
  }
}
