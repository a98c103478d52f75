import { randomUUID } from 'crypto';
import { hostname } from 'os';
import type { Logger } from '@nestjs/common';
import type { Queryable } from '../db/db.service';

/** The lease of withRunLease: `acquired` false when another holder has it (nothing ran), with how long it still ran then (ms, by PostgreSQL's clock). */
export type RunLeaseResult<T> = { acquired: true; result: T } | { acquired: false; heldForMs: number };

/** The run's lease expired and another process took it: this run stops where it is. */
export class RunLeaseLostError extends Error {
  constructor(job: string) {
    super(`the lease of ${job} expired and another run took it; this run stopped`);
  }
}

/**
 * Another holder has the lease of a maintenance job (nothing ran). The maintenance worker puts
 * such a job back until the lease ends (MaintenanceScheduler): never completed as if it had run.
 */
export class RunLeaseHeldError extends Error {
  constructor(
    message: string,
    /** how long the other holder's lease still ran (ms) */
    readonly heldForMs: number,
  ) {
    super(message);
  }
}

/** A holder of its own for a run that has no stable identity (a CLI run): never reclaimed. */
export const randomRunHolder = () => `${hostname()}:${process.pid}:${randomUUID()}`;

export interface RunLeaseOptions {
  /**
   * Who holds the lease. A run under the holder that has it reclaims it (acquires at once): a
   * worker run passes its BullMQ job's (maintenanceJobHolder), so the retry or stalled re-run of
   * a job whose worker died, or whose database went away mid-run, takes its own lease back
   * instead of waiting for it to expire. Default: a random one (randomRunHolder).
   */
  holder?: string;
  log?: Pick<Logger, 'warn'>;
}

/**
 * Runs `fn` while holding the lease of maintenance job `job`: a row of maintenance_runs
 * (`running_until`, `holder`) taken by one atomic statement, so one run at a time across workers
 * and the CLI through any pooler (no session state: a transaction-mode PgBouncer may run each
 * statement on another server connection). The lease is taken when it is free, expired, or
 * already `holder`'s (see RunLeaseOptions.holder); if another holder's is still running, returns
 * at once without running. While `fn` runs, a heartbeat renews the lease every `leaseMs` / 5,
 * so however long a step takes (a slow batch), the lease of a live run does not expire; a holder
 * that died stops renewing and its lease expires by itself `leaseMs` later. `fn` also calls
 * `renew` between steps: it renews and throws RunLeaseLostError when another holder has taken the
 * lease (it had expired: the heartbeat could not reach PostgreSQL for `leaseMs`), or the
 * database's error when it cannot be reached. When `fn` resolves, one statement records the run
 * as completed (last_completed_at) and ends the lease if still ours; when it throws, the lease is
 * ended (if the database can be reached; otherwise it stays until it expires or the same holder
 * reclaims it) and nothing is recorded.
 */
export async function withRunLease<T>(
  db: Queryable,
  job: string,
  leaseMs: number,
  fn: (renew: () => Promise<void>) => Promise<T>,
  opts: RunLeaseOptions = {},
): Promise<RunLeaseResult<T>> {
  const { log } = opts;
  const holder = opts.holder ?? randomRunHolder();
  const acquired = await db.query(
    `INSERT INTO maintenance_runs (job, running_until, holder) VALUES ($1, now() + make_interval(secs => $3::double precision / 1000), $2)
     ON CONFLICT (job) DO UPDATE SET running_until = EXCLUDED.running_until, holder = EXCLUDED.holder
      WHERE maintenance_runs.running_until IS NULL OR maintenance_runs.running_until < now() OR maintenance_runs.holder = EXCLUDED.holder
     RETURNING holder`,
    [job, holder, leaseMs],
  );
  if (!acquired.length) {
    const [held] = await db.query<{ ms: number | null }>(
      `SELECT GREATEST(0, ceil(extract(epoch FROM running_until - now()) * 1000))::int AS ms FROM maintenance_runs WHERE job = $1`,
      [job],
    );
    return { acquired: false, heldForMs: held?.ms ?? 0 };
  }
  const renewOnce = async () => {
    const still = await db.query(
      `UPDATE maintenance_runs SET running_until = now() + make_interval(secs => $3::double precision / 1000) WHERE job = $1 AND holder = $2 RETURNING 1`,
      [job, holder, leaseMs],
    );
    if (!still.length) throw new RunLeaseLostError(job);
  };
  // the heartbeat: a failed renewal (PostgreSQL away) is tried again at the next beat; a lost
  // lease is reported by the next `renew` of the run
  let beat: Promise<unknown> = Promise.resolve();
  const timer = setInterval(() => {
    beat = renewOnce().catch((e: Error) => log?.warn(`renewing the lease of ${job}: ${e.message}`));
  }, Math.max(leaseMs / 5, 50));
  timer.unref?.();
  const stopHeartbeat = async () => {
    clearInterval(timer);
    await beat; // a renewal in flight lands before the lease is ended (it matches our holder only)
  };
  let result: T;
  try {
    result = await fn(renewOnce);
  } catch (err) {
    await stopHeartbeat();
    await db
      .query(`UPDATE maintenance_runs SET running_until = NULL, holder = NULL WHERE job = $1 AND holder = $2`, [job, holder])
      .catch((e: Error) => log?.warn(`ending the lease of ${job} (it expires by itself, or its holder's retry reclaims it): ${e.message}`));
    throw err;
  }
  await stopHeartbeat();
  // the run completed: recorded even if its lease was taken meanwhile (whose holder keeps it)
  await db
    .query(
      `UPDATE maintenance_runs SET last_completed_at = now(),
              running_until = CASE WHEN holder = $2 THEN NULL ELSE running_until END,
              holder = CASE WHEN holder = $2 THEN NULL ELSE holder END
        WHERE job = $1`,
      [job, holder],
    )
    .catch((e: Error) => log?.warn(`recording the run of ${job} (its lease expires by itself): ${e.message}`));
  return { acquired: true, result };
}

/** Whether maintenance job `job` has not completed within the last `withinMs` (or never). */
export async function maintenanceRunDue(db: Queryable, job: string, withinMs: number): Promise<boolean> {
  const rows = await db.query<{ due: boolean }>(
    `SELECT NOT EXISTS (SELECT 1 FROM maintenance_runs WHERE job = $1 AND last_completed_at > now() - make_interval(secs => $2::double precision / 1000)) AS due`,
    [job, withinMs],
  );
  return rows[0].due;
}
