import { Inject, Injectable, Logger, Module, OnModuleInit } from '@nestjs/common';
import { APP_CONFIG, AppConfig } from '../../config/config';
import { Db } from '../db/db.service';
import { MaintenanceModule, MaintenanceScheduler } from './maintenance.scheduler';

export const EXPIRED_ROWS_SCHEDULER_ID = 'expired-rows-sweep-hourly';
export const EXPIRED_ROWS_PATTERN = '17 * * * *';
/** Rows are kept this long after they stopped being usable, so "expired" answers and forensics stay right meanwhile. */
export const EXPIRED_ROWS_RETENTION = `interval '1 day'`;
const BATCH = 5000;
const MAX_BATCHES_PER_TABLE = 200;

/**
 * One-time and short-lived rows that only ever get refused once expired: what each table's
 * rows look like when nothing can use them any more.
 */
export function expiredRowRules(
  config: Pick<AppConfig, 'DASHBOARD_SESSION_IDLE_SECONDS' | 'OUTBOX_RETENTION_DAYS' | 'WEBHOOK_DELIVERY_RETENTION_DAYS' | 'AUDIT_RETENTION_DAYS' | 'AGENT_ACTIVITY_RETENTION_DAYS'>,
): { table: string; expired: string }[] {
  const gone = (col: string) => `${col} < now() - ${EXPIRED_ROWS_RETENTION}`;
  const olderThanDays = (days: number) => `created_at < now() - make_interval(days => ${Number(days)})`;
  return [
    // history kept for a set time when the operator sets one (0: forever), found through BRIN indexes
    ...(config.AUDIT_RETENTION_DAYS > 0 ? [{ table: 'audit_events', expired: olderThanDays(config.AUDIT_RETENTION_DAYS) }] : []),
    ...(config.AGENT_ACTIVITY_RETENTION_DAYS > 0 ? [{ table: 'agent_actions', expired: olderThanDays(config.AGENT_ACTIVITY_RETENTION_DAYS) }] : []),
    { table: 'account_tokens', expired: gone('expires_at') }, // verification, reset, magic-link tokens
    { table: 'email_otp_codes', expired: gone('expires_at') },
    { table: 'mfa_challenges', expired: gone('expires_at') },
    { table: 'idempotency_keys', expired: gone('expires_at') },
    { table: 'agent_denylist', expired: gone('expires_at') }, // every token it refused has expired too
    { table: 'revoked_access_tokens', expired: gone('expires_at') }, // the token itself has expired
    { table: 'dashboard_password_resets', expired: gone('expires_at') }, // used or not, the link is dead
    // invitations accepted, or that expired unused, a day ago (the audit log keeps who joined)
    { table: 'dashboard_invites', expired: `(${gone('expires_at')} OR (accepted_at IS NOT NULL AND ${gone('accepted_at')}))` },
    // end-user sessions that ended (revoked) a day ago, found through a partial index; their
    // refresh tokens go with them by cascade. Sessions that simply ran out of refresh tokens go
    // with their last token (see ExpiredRowsSweeper.sweepRefreshTokens).
    { table: 'user_sessions', expired: `revoked_at IS NOT NULL AND ${gone('revoked_at')}` },
    {
      table: 'dashboard_sessions',
      expired: `(${gone('absolute_expires_at')} OR ${gone('revoked_at')} OR ${gone(`last_seen_at + make_interval(secs => ${config.DASHBOARD_SESSION_IDLE_SECONDS})`)})`,
    },
    // outbox rows whose job settled (sent, delivered or given up) OUTBOX_RETENTION_DAYS ago (settling
    // already dropped their encrypted link tokens and codes). Far past the queue reconciler's 20-hour window,
    // so no row it could still re-queue; created_at (BRIN) bounds the scan. A row handed to the
    // queue that long ago and never settled (its consumer could not record it, or Redis lost its
    // job after the reconciler's window) goes too: nothing will ever send it, and its link has long
    // expired. A row not handed to the queue yet, or only lately, stays whatever its age: the relay
    // still sends it (a worker back from a long outage sweeps and relays at once; the events must
    // not go before they are sent). An unsettled row stays at least UNSETTLED_OUTBOX_DAYS after it was
    // handed over, whatever the retention: a mail is retried for about 25 hours, and the mail worker
    // sends only while its row is there (an erasure deletes the unsent mails of its user)
    {
      table: 'outbox',
      expired: `created_at < now() - make_interval(days => ${Number(config.OUTBOX_RETENTION_DAYS)})
                AND (processed_at < now() - make_interval(days => ${Number(config.OUTBOX_RETENTION_DAYS)})
                     OR (processed_at IS NULL AND dispatched_at < now() - make_interval(days => ${Math.max(Number(config.OUTBOX_RETENTION_DAYS), UNSETTLED_OUTBOX_DAYS)})))`,
    },
    // who was counted in a month's active users: needed only while that month's count can still
    // grow (the race guard of the first activity), so months before the previous one go
    { table: 'tenant_mau_users', expired: `month < (date_trunc('month', now() AT TIME ZONE 'UTC') - interval '1 month')::date` },
    // finished webhook deliveries (the endpoint's delivery log) after WEBHOOK_DELIVERY_RETENTION_DAYS;
    // pending ones stay whatever their age
    {
      table: 'webhook_deliveries',
      expired: `created_at < now() - make_interval(days => ${Number(config.WEBHOOK_DELIVERY_RETENTION_DAYS)}) AND status <> 'pending'`,
    },
  ];
}

/** Days an unsettled outbox row is kept after it was handed to the queue: longer than a mail's retries (about 25 h, a little more with jitter and a worker outage). */
export const UNSETTLED_OUTBOX_DAYS = 3;

/** Deletes expired one-time rows in batches (short transactions, no long locks). */
@Injectable()
export class ExpiredRowsSweeper {
  private readonly logger = new Logger(ExpiredRowsSweeper.name);

  constructor(
    private readonly db: Db,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  async runOnce(): Promise<Record<string, number>> {
    const deleted: Record<string, number> = await this.sweepRefreshTokens();
    for (const { table, expired } of expiredRowRules(this.config)) {
      deleted[table] ??= 0;
      for (let i = 0; i < MAX_BATCHES_PER_TABLE; i++) {
        const { rowCount } = await this.db.exec(`DELETE FROM ${table} WHERE ctid IN (SELECT ctid FROM ${table} WHERE ${expired} LIMIT ${BATCH})`);
        deleted[table] += rowCount;
        if (rowCount < BATCH) break;
      }
    }
    // a webhook secret a rotation replaced, once its overlap ended: it signs nothing any more, and
    // is not kept (encrypted) at rest until the endpoint's next rotation
    const { rowCount: secrets } = await this.db.exec(
      `UPDATE webhook_endpoints SET previous_secret_enc = NULL, previous_secret_expires_at = NULL WHERE previous_secret_expires_at <= now()`,
    );
    deleted['webhook_previous_secrets'] = secrets;
    const total = Object.values(deleted).reduce((a, b) => a + b, 0);
    if (total) this.logger.log(`expired rows swept: ${JSON.stringify(deleted)}`);
    return deleted;
  }

  /**
   * End-user refresh tokens expired a day ago (an expired one is refused whatever else is known
   * of it, so reuse detection loses nothing by forgetting it; rotation leaves one row per
   * refresh), found through the BRIN index on expires_at. A session whose last token goes with
   * a batch goes in the same transaction (every session starts with a token, so one without
   * any can never continue; access tokens of a deleted session are refused, the bearer guard
   * treats a missing session as ended). Both steps commit together: no session is ever left
   * behind without the token that would have found it.
   *
   * Lock order: the tokens' sessions first (SKIP LOCKED), then the tokens, as a refresh and the
   * guest purge (users, sessions, then tokens by cascade) take them: tokens of a session held
   * right now are left for the next sweep, and the sweep never deadlocks with the purge.
   */
  private async sweepRefreshTokens(): Promise<Record<string, number>> {
    const deleted = { refresh_tokens: 0, user_sessions: 0 };
    for (let i = 0; i < MAX_BATCHES_PER_TABLE; i++) {
      const { candidates, tokens } = await this.db.tx(async (tx) => {
        const [r] = await tx.query<{ candidates: number; sessions: string[] | null }>(
          `WITH cand AS (
             SELECT ctid AS tid, session_id FROM refresh_tokens WHERE expires_at < now() - ${EXPIRED_ROWS_RETENTION} LIMIT ${BATCH}
           ), held AS (
             SELECT id FROM user_sessions WHERE id IN (SELECT session_id FROM cand) FOR UPDATE SKIP LOCKED
           ), gone AS (
             DELETE FROM refresh_tokens WHERE ctid IN (SELECT tid FROM cand WHERE session_id IN (SELECT id FROM held))
                AND expires_at < now() - ${EXPIRED_ROWS_RETENTION}
             RETURNING session_id
           )
           SELECT (SELECT count(*)::int FROM cand) AS candidates, (SELECT array_agg(session_id) FROM gone) AS sessions`,
        );
        const gone = r.sessions ?? [];
        const sessions = [...new Set(gone)];
        if (sessions.length) {
          const { rowCount } = await tx.exec(
            `DELETE FROM user_sessions s WHERE s.id = ANY($1::uuid[])
                AND NOT EXISTS (SELECT 1 FROM refresh_tokens r WHERE r.session_id = s.id)`,
            [sessions],
          );
          deleted.user_sessions += rowCount;
        }
        return { candidates: r.candidates, tokens: gone.length };
      });
      deleted.refresh_tokens += tokens;
      // a batch all of whose sessions were held would come back the same: stop until the next sweep
      if (candidates < BATCH || tokens === 0) break;
    }
    return deleted;
  }
}

/** Worker-only: the hourly sweep as a maintenance job. */
@Injectable()
export class ExpiredRowsSweepSchedule implements OnModuleInit {
  constructor(
    private readonly sweeper: ExpiredRowsSweeper,
    private readonly maintenance: MaintenanceScheduler,
  ) {}

  onModuleInit(): void {
    this.maintenance.register({ name: 'expired-rows-sweep', schedulerId: EXPIRED_ROWS_SCHEDULER_ID, pattern: EXPIRED_ROWS_PATTERN, run: () => this.sweeper.runOnce() });
  }
}

/** The kernel's own maintenance in the worker. */
@Module({ imports: [MaintenanceModule], providers: [ExpiredRowsSweeper, ExpiredRowsSweepSchedule], exports: [ExpiredRowsSweeper] })
export class MaintenanceWorkerModule {}
