import { Injectable, Logger } from '@nestjs/common';
import { TokenRevocationService } from '../../../shared/auth/token-revocation.service';
import { UserProfileCache } from '../../../shared/cache/user-profile.cache';
import { Db, Queryable } from '../../../shared/db/db.service';
import { EventsService } from '../../../shared/events/events.service';
import { RunLeaseHeldError, withRunLease } from '../../../shared/maintenance/run-lock';
import { WEBHOOK_TOPIC } from '../../webhooks/webhook-events';

/** spec 8: at most this many guests per tenant per run. */
export const PURGE_BATCH_PER_TENANT = 1000;
/** The `reason` of the `user.deleted` webhook event of a purged guest (an owner's erasure has none). */
export const GUEST_RETENTION_REASON = 'guest_retention';
/** The maintenance job name of the purge (its row of maintenance_runs: lease and last completed run). */
export const GUEST_PURGE_RUN = 'guests-purge';
/**
 * The run's lease: renewed every minute while the run goes on (however long one tenant's batch
 * takes) and after each tenant; how long a run whose process died blocks a run of another holder
 * (the retry of the same worker job reclaims it at once).
 */
export const GUEST_PURGE_LEASE_MS = 5 * 60_000;

export interface PurgeRunResult {
  tenants: number;
  deleted: number;
  perTenant: { tenantId: string; deleted: number }[];
  /** tenants whose delete failed this run (logged; the next run takes them again) */
  failedTenants: string[];
  /**
   * tenants whose purged guests were deleted but Redis could not be told (their cached profiles
   * and session states live on until they expire: USER_CACHE_TTL_SECONDS, the access token's exp)
   */
  untoldTenants: string[];
}

/**
 * Another purge (the worker's, or another CLI run) holds the run's lease: this one did nothing.
 * The CLI prints it (exit 1); the worker puts its job back until that lease ends.
 */
export class PurgeAlreadyRunningError extends RunLeaseHeldError {
  constructor(heldForMs = 0) {
    super('a guest purge is already running (the worker or another CLI run); nothing was deleted, try again once it has finished', heldForMs);
  }
}

/**
 * spec 3.1: hard-deletes guests whose last activity is older than their tenant's retention, at
 * most 1000 per tenant per run, with their sessions and refresh tokens (ON DELETE CASCADE).
 * A claimed user is never deleted: the delete re-checks is_anonymous under the row lock, and a
 * guest being claimed or refreshed right now (its user row or session row locked) is skipped
 * (SKIP LOCKED on both, so the purge never waits on a lock and never deadlocks with them).
 * Locks are taken users, then sessions, then (by cascade) refresh tokens: the hourly sweep of
 * expired refresh tokens takes sessions before tokens too (ExpiredRowsSweeper), so the two never
 * deadlock. One run at a time, worker and CLI alike (a lease row in maintenance_runs, renewed
 * while the run goes on: no session state, so it holds through a transaction-mode pooler), so
 * concurrent runs never add up past the per-run cap; a completed run is recorded there as it
 * releases the lease. A tenant whose delete fails is logged and left to the next run; the other
 * tenants go on. The lease is checked (renewed) after each tenant, failed or not: when that fails
 * (PostgreSQL away, or the lease lost to another run after it expired) the run stops there and
 * fails, and a worker job's retry takes its lease back and runs again. Each purged guest is sent
 * to webhooks as `user.deleted` `{user_id, reason: 'guest_retention'}`, as an owner's erasure is
 * (a tenant keeps data under guest ids: spec 3.1 carries them over on a claim), in the same
 * transaction as the delete; only when the tenant has an endpoint that would receive it (a
 * tenant without one gets no outbox rows: a run deletes up to 1000 guests per tenant).
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

  /**
   * One run, recorded in maintenance_runs once completed; throws PurgeAlreadyRunningError when
   * another holder's run has the lease. `holder`: the worker's job (its retries reclaim the lease
   * of an attempt that died or failed); none (a CLI run): a random one.
   */
  async runOnce(opts: { holder?: string } = {}): Promise<PurgeRunResult> {
    const r = await withRunLease(this.db, GUEST_PURGE_RUN, GUEST_PURGE_LEASE_MS, (renew) => this.run(renew), { holder: opts.holder, log: this.logger });
    if (!r.acquired) throw new PurgeAlreadyRunningError(r.heldForMs);
    return r.result;
  }

  private async run(renew: () => Promise<void>): Promise<PurgeRunResult> {
    const tenants = await this.db.query<{ id: string }>(
      `SELECT t.id FROM tenants t
        WHERE EXISTS (SELECT 1 FROM users u WHERE u.tenant_id = t.id AND u.is_anonymous
                        AND u.last_active_at < now() - make_interval(days => t.anonymous_user_ttl_days))
        ORDER BY t.id`,
    );
    const perTenant: PurgeRunResult['perTenant'] = [];
    const failedTenants: string[] = [];
    const untoldTenants: string[] = [];
    for (const t of tenants) {
      try {
        const r = await this.purgeTenant(t.id);
        perTenant.push({ tenantId: t.id, deleted: r.deleted });
        if (!r.told) untoldTenants.push(t.id);
      } catch (err) {
        failedTenants.push(t.id);
        this.logger.error(`guest purge of tenant ${t.id} failed (the next run takes it again): ${err instanceof Error ? err.message : err}`);
      }
      // still ours, renewed: a run whose lease another took over (it had expired) stops here, and
      // so does one that cannot reach PostgreSQL (the tenants' deletes would fail too): it fails,
      // for the job's retry (which reclaims the lease) rather than logging every tenant as failed
      await renew();
    }
    const total = perTenant.reduce((a, b) => a + b.deleted, 0);
    this.logger.log(`guest purge: ${total} guests deleted across ${perTenant.length} tenants${failedTenants.length ? `, ${failedTenants.length} failed` : ''}`);
    // nothing went through (PostgreSQL away ...): fail, so the job's attempts retry it
    if (failedTenants.length && !perTenant.length) throw new Error(`guest purge failed for every tenant (${failedTenants.length})`);
    if (untoldTenants.length) this.logger.warn(`guest purge: Redis could not be told of the guests purged in ${untoldTenants.length} tenant(s); their cached sessions and profiles expire on their own`);
    return { tenants: perTenant.length, deleted: total, perTenant, failedTenants, untoldTenants };
  }

  /**
   * One `user.deleted` outbox row per purged guest, written only while an endpoint of the tenant
   * would get it (enabled, subscribed to it or to `*`, not filtered to one agent: the event names
   * no agent); the fan-out checks each endpoint again when it runs.
   */
  private async announce(tx: Queryable, tenantId: string, ids: string[]): Promise<void> {
    const [insert, params] = this.events.outboxRowsSql(
      ids.map((id) => ({ tenantId, topic: WEBHOOK_TOPIC, eventType: 'user.deleted', payload: { user_id: id, reason: GUEST_RETENTION_REASON } })),
      2,
      `EXISTS (SELECT 1 FROM webhook_endpoints e WHERE e.tenant_id = $1 AND e.disabled_at IS NULL AND e.agent_client_id IS NULL
                 AND ('user.deleted' = ANY (e.events) OR '*' = ANY (e.events)))`,
    );
    await tx.query(insert, [tenantId, ...params], 'guest_purge_announce');
  }

  /** One tenant's batch in one transaction; its retention is read in the same statement (a change made during the run applies). */
  private async purgeTenant(tenantId: string): Promise<{ deleted: number; told: boolean }> {
    const { ids, sids } = await this.db.tx(async (tx) => {
      const [r] = await tx.query<{ n: number; ids: string[]; sids: string[]; ttl: number }>(
        `WITH t AS (
           SELECT anonymous_user_ttl_days AS ttl FROM tenants WHERE id = $1
         ), victims AS (
           SELECT u.id FROM users u, t
            WHERE u.tenant_id = $1 AND u.is_anonymous AND u.last_active_at < now() - make_interval(days => t.ttl)
            ORDER BY u.last_active_at LIMIT $2 FOR UPDATE OF u SKIP LOCKED
         ), held AS (
           -- their sessions too, before the cascade reaches them: a claim or a refresh takes the
           -- session lock first, so a guest whose session is held right now is in use and skipped
           -- (waiting for it would deadlock with a claim that then waits for the user row)
           SELECT id, user_id FROM user_sessions WHERE user_id IN (SELECT id FROM victims) FOR UPDATE SKIP LOCKED
         ), d AS (
           DELETE FROM users u WHERE u.id IN (SELECT id FROM victims) AND u.is_anonymous
              -- per user through the sessions' user_id index (a NOT IN over held made PostgreSQL scan
              -- every tenant's sessions once per batch)
              AND NOT EXISTS (SELECT 1 FROM user_sessions s WHERE s.user_id = u.id AND NOT EXISTS (SELECT 1 FROM held h WHERE h.id = s.id))
           RETURNING u.id
         )
         SELECT count(*)::int AS n, coalesce(array_agg(id), '{}') AS ids,
                coalesce((SELECT array_agg(h.id) FROM held h WHERE h.user_id IN (SELECT id FROM d)), '{}') AS sids,
                (SELECT ttl FROM t) AS ttl FROM d`,
        [tenantId, PURGE_BATCH_PER_TENANT],
      );
      if (r.n > 0) {
        await this.events.audit(tx, {
          tenantId,
          type: 'guests.purged',
          actorType: 'system',
          metadata: { count: r.n, retention_days: r.ttl, batch_limit: PURGE_BATCH_PER_TENANT },
        });
        await this.announce(tx, tenantId, r.ids);
      }
      return { ids: r.ids, sids: r.sids };
    });
    // a purged guest's access tokens then fail on every bearer route, as those of any ended
    // session do (the session state cached by the revocation check), and at GET /me (its profile)
    const sessionsTold = await this.revocation.markSessionsRevoked(sids).then(() => true, () => false);
    const profilesTold = await this.profiles.invalidate(ids);
    return { deleted: ids.length, told: sessionsTold && profilesTold };
  }
}
