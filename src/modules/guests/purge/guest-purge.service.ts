import { Injectable, Logger } from '@nestjs/common';
import { TokenRevocationService } from '../../../shared/auth/token-revocation.service';
import { UserProfileCache } from '../../../shared/cache/user-profile.cache';
import { Db } from '../../../shared/db/db.service';
import { EventsService } from '../../../shared/events/events.service';

/** spec 8: at most this many guests per tenant per run. */
export const PURGE_BATCH_PER_TENANT = 1000;

export interface PurgeRunResult {
  tenants: number;
  deleted: number;
  perTenant: { tenantId: string; deleted: number }[];
}

/**
 * spec 3.1: hard-deletes guests whose last activity is older than their tenant's retention, at
 * most 1000 per tenant per run, with their sessions and refresh tokens (ON DELETE CASCADE).
 * A claimed user is never deleted: the delete re-checks is_anonymous under the row lock, and a
 * guest being claimed or refreshed right now (its user row or session row locked) is skipped
 * (SKIP LOCKED on both, so the purge never waits on a lock and never deadlocks with them).
 */
@Injectable()
export class GuestPurgeService {
  private readonly logger = new Logger(GuestPurgeService.name);

  constructor(
    private readonly db: Db,
    private readonly events: EventsService,
    private readonly profiles: UserProfileCache,
    private readonly revocation: TokenRevocationService,
  ) {}

  async runOnce(): Promise<PurgeRunResult> {
    const tenants = await this.db.query<{ id: string; ttl: number }>(
      `SELECT t.id, t.anonymous_user_ttl_days AS ttl FROM tenants t
        WHERE EXISTS (SELECT 1 FROM users u WHERE u.tenant_id = t.id AND u.is_anonymous
                        AND u.last_active_at < now() - make_interval(days => t.anonymous_user_ttl_days))`,
    );
    const perTenant: PurgeRunResult['perTenant'] = [];
    for (const t of tenants) {
      const { ids, sids } = await this.db.tx(async (tx) => {
        const [r] = await tx.query<{ n: number; ids: string[]; sids: string[] }>(
          `WITH victims AS (
             SELECT id FROM users
              WHERE tenant_id = $1 AND is_anonymous AND last_active_at < now() - make_interval(days => $2)
              ORDER BY last_active_at LIMIT $3 FOR UPDATE SKIP LOCKED
           ), held AS (
             -- their sessions too, before the cascade reaches them: a claim or a refresh takes the
             -- session lock first, so a guest whose session is held right now is in use and skipped
             -- (waiting for it would deadlock with a claim that then waits for the user row)
             SELECT id, user_id FROM user_sessions WHERE user_id IN (SELECT id FROM victims) FOR UPDATE SKIP LOCKED
           ), d AS (
             DELETE FROM users u WHERE u.id IN (SELECT id FROM victims) AND u.is_anonymous
                AND NOT EXISTS (SELECT 1 FROM user_sessions s WHERE s.user_id = u.id AND s.id NOT IN (SELECT id FROM held))
             RETURNING u.id
           )
           SELECT count(*)::int AS n, coalesce(array_agg(id), '{}') AS ids,
                  coalesce((SELECT array_agg(h.id) FROM held h WHERE h.user_id IN (SELECT id FROM d)), '{}') AS sids FROM d`,
          [t.id, t.ttl, PURGE_BATCH_PER_TENANT],
        );
        if (r.n > 0) {
          await this.events.audit(tx, {
            tenantId: t.id,
            type: 'guests.purged',
            actorType: 'system',
            metadata: { count: r.n, retention_days: t.ttl, batch_limit: PURGE_BATCH_PER_TENANT },
          });
        }
        return { ids: r.ids, sids: r.sids };
      });
      // a purged guest's access tokens then fail on every bearer route, as those of any ended
      // session do (the session state cached by the revocation check), and at GET /me (its profile)
      await this.revocation.markSessionsRevoked(sids);
      await this.profiles.invalidate(ids);
      perTenant.push({ tenantId: t.id, deleted: ids.length });
    }
    const total = perTenant.reduce((a, b) => a + b.deleted, 0);
    this.logger.log(`guest purge: ${total} guests deleted across ${perTenant.length} tenants`);
    return { tenants: perTenant.length, deleted: total, perTenant };
  }
}
