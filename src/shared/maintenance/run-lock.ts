import { randomUUID } from 'crypto';
import { hostname } from 'os';
import type { Logger } from '@nestjs/common';
import type { Queryable } from '../db/db.service';

/** The lease of withRunLease: `acquired` false when another process holds it (nothing ran). */
export type RunLeaseResult<T> = { acquired: true; result: T } | { acquired: false };

/** The run's lease expired and another process took it: this run stops where it is. */
export class RunLeaseLostError extends Error {
  constructor(job: string) {
    super(`the lease of ${job} expired and another run took it; this run stopped`);
  }
}

/**
 * Runs `fn` while holding the lease of maintenance job `job`: a row of maintenance_runs
 * (`running_until`, `holder`) taken by one atomic statement, so one run at a time across workers
 * and the CLI through any pooler (no session state: a transaction-mode PgBouncer may run each
 * statement on another server connection). If another holder's lease is still running, returns at
 * once without running. `fn` calls `renew` as it progresses (the lease is `leaseMs` from the last
 * renewal; a holder that died leaves a lease that expires by itself). When `fn` resolves, one
 * statement records the run as completed (last_completed_at) and ends the lease if still ours;
 * when it throws, the lease is ended and nothing is recorded.
 */
export async function withRunLease<T>(
  db: Queryable,
  job: string,
  leaseMs: number,
  fn: (renew: () => Promise<void>) => Promise<T>,
  log?: Pick<Logger, 'warn'>,
): Promise<RunLeaseResult<T>> {
  const holder = `${hostname()}:${process.pid}:${randomUUID()}`;
  const acquired = await db.query(
    `INSERT INTO maintenance_runs (job, running_until, holder) VALUES ($1, now() + make_interval(secs => $3::double precision / 1000), $2)
     ON CONFLICT (job) DO UPDATE SET running_until = EXCLUDED.running_until, holder = EXCLUDED.holder
      WHERE maintenance_runs.running_until IS NULL OR maintenance_runs.running_until < now()
     RETURNING holder`,
    [job, holder, leaseMs],
  );
  if (!acquired.length) return { acquired: false };
  const renew = async () => {
    const still = await db.query(
      `UPDATE maintenance_runs SET running_until = now() + make_interval(secs => $3::double precision / 1000) WHERE job = $1 AND holder = $2 RETURNING 1`,
      [job, holder, leaseMs],
    );
    if (!still.length) throw new RunLeaseLostError(job);
  };
  let result: T;
  try {
    result = await fn(renew);
  } catch (err) {
    await db
      .query(`UPDATE maintenance_runs SET running_until = NULL, holder = NULL WHERE job = $1 AND holder = $2`, [job, holder])
      .catch((e: Error) => log?.warn(`ending the lease of ${job} (it expires by itself): ${e.message}`));
    throw err;
  }
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
