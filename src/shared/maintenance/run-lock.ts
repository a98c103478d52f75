import type { Db, Queryable } from '../db/db.service';

/** The held lock of withRunLock: `acquired` false when another process holds it (nothing ran). */
export type RunLockResult<T> = { acquired: true; result: T } | { acquired: false };

/**
 * Runs `fn` while holding a session-level PostgreSQL advisory lock named `name` on a connection
 * of its own; if another process (worker or CLI) holds it, returns at once without running
 * (pg_try_advisory_lock never waits). The lock goes with the connection if the process dies.
 */
export async function withRunLock<T>(db: Db, name: string, fn: () => Promise<T>): Promise<RunLockResult<T>> {
  const client = await db.pool.connect();
  let lost: Error | undefined;
  const onError = (err: Error) => (lost = err);
  client.on('error', onError);
  try {
    const { rows } = await client.query<{ ok: boolean }>(`SELECT pg_try_advisory_lock(hashtextextended($1, 0)) AS ok`, [`authp:${name}`]);
    if (!rows[0].ok) return { acquired: false };
    try {
      return { acquired: true, result: await fn() };
    } finally {
      if (!lost) await client.query(`SELECT pg_advisory_unlock(hashtextextended($1, 0))`, [`authp:${name}`]).catch((e: Error) => (lost = e));
    }
  } finally {
    client.removeListener('error', onError);
    // a connection whose unlock failed is dropped, never pooled with the lock still held
    client.release(lost);
  }
}

/** Records that maintenance job `job` completed now (maintenance_runs). */
export async function recordMaintenanceRun(db: Queryable, job: string): Promise<void> {
  await db.query(
    `INSERT INTO maintenance_runs (job, last_completed_at) VALUES ($1, now())
     ON CONFLICT (job) DO UPDATE SET last_completed_at = now()`,
    [job],
  );
}

/** Whether maintenance job `job` has not completed within the last `withinMs` (or never). */
export async function maintenanceRunDue(db: Queryable, job: string, withinMs: number): Promise<boolean> {
  const rows = await db.query<{ due: boolean }>(
    `SELECT NOT EXISTS (SELECT 1 FROM maintenance_runs WHERE job = $1 AND last_completed_at > now() - make_interval(secs => $2::double precision / 1000)) AS due`,
    [job, withinMs],
  );
  return rows[0].due;
}
