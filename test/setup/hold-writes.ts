import { randomBytes, randomInt } from 'crypto';
import { PoolClient } from 'pg';
import { Db } from '../../src/shared/db/db.service';

/** The release of a hold (drops the trigger), plus a way to see a statement inside it. */
export interface WriteHold {
  (): Promise<void>;
  /** Resolves with the backend pid of a statement inside the hold once one is (rejects after `timeoutMs`). */
  reached(timeoutMs?: number): Promise<number>;
}

/** A two-int advisory lock key of its own per hold, both positive (pg_locks shows them as classid, objid; objsubid = 2). */
function lockKey(): [number, number] {
  return [randomInt(1, 2 ** 31), randomInt(1, 2 ** 31)];
}

async function poll<T>(what: string, timeoutMs: number, probe: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`${what}: not seen within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** The pid of a backend that holds (granted) or waits for (not granted) the advisory lock `key`. */
async function advisoryPid(db: Db, [k1, k2]: [number, number], granted: boolean): Promise<number | undefined> {
  const [r] = await db.query<{ pid: number }>(
    `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
        AND classid = $1::bigint::oid AND objid = $2::bigint::oid AND objsubid = 2 AND granted = $3 LIMIT 1`,
    [k1, k2, granted],
  );
  return r?.pid;
}

/**
 * Holds every row a statement writes to `table` (`event`) that matches `when` (a trigger condition
 * on NEW) for `seconds`, inside that statement: its transaction keeps its locks meanwhile, so a
 * request sent during the hold meets the race window every time. Resolves to the release (drops
 * the trigger), to call in a `finally`; its `reached()` resolves once a statement is inside the
 * hold (the trigger takes a shared advisory lock of its own before sleeping, seen in pg_locks).
 */
export async function holdWrites(db: Db, table: string, event: 'INSERT' | 'UPDATE', when: string, seconds = 0.6): Promise<WriteHold> {
  const fn = `hold_${table}_${randomBytes(6).toString('hex')}`;
  const key = lockKey();
  await db.query(
    `CREATE FUNCTION ${fn}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_advisory_xact_lock_shared(${key[0]}, ${key[1]}); PERFORM pg_sleep(${Number(seconds)}); RETURN NEW; END $$`,
  );
  await db.query(`CREATE TRIGGER ${fn} BEFORE ${event} ON ${table} FOR EACH ROW WHEN (${when}) EXECUTE FUNCTION ${fn}()`);
  const release = async () => {
    await db.query(`DROP TRIGGER ${fn} ON ${table}`);
    await db.query(`DROP FUNCTION ${fn}()`);
  };
  return Object.assign(release, { reached: (timeoutMs = 10_000) => poll(`a write to ${table} inside the hold`, timeoutMs, () => advisoryPid(db, key, true)) });
}

/**
 * A gate the test holds shut: a statement whose trigger body runs `wait` stops there (inside its
 * statement and transaction, keeping every lock taken so far) until `open()`. Shut from the start:
 * an advisory lock that a connection of the test holds exclusively, the trigger taking it shared.
 */
export interface AdvisoryGate {
  /** the trigger body's statement (shared: every row that reaches it passes once open) */
  wait: string;
  /** a pg_locks condition that leaves this gate's own locks out */
  notThisGate: string;
  /** Resolves with the backend pid of a statement waiting at the gate once one is. */
  reached(timeoutMs?: number): Promise<number>;
  /** Resolves once a statement of another backend waits for a lock that backend `pid` holds (say, the one at the gate). */
  waitedOnBy(pid: number, timeoutMs?: number): Promise<void>;
  /** Lets every statement at the gate (and any later one) go on; again is a no-op. */
  open(): Promise<void>;
}

/** A shut gate (see AdvisoryGate). The gated statement is subject to statement_timeout (30 s by default). */
export async function shutGate(db: Db): Promise<AdvisoryGate> {
  const key = lockKey();
  const holder: PoolClient = await db.pool.connect();
  try {
    await holder.query(`SELECT pg_advisory_lock($1::int, $2::int)`, key);
  } catch (e) {
    holder.release(true);
    throw e;
  }
  let closed = true;
  return {
    wait: `PERFORM pg_advisory_xact_lock_shared(${key[0]}, ${key[1]})`,
    notThisGate: `NOT (locktype = 'advisory' AND objsubid = 2 AND classid = ${key[0]}::bigint::oid AND objid = ${key[1]}::bigint::oid)`,
    reached: (timeoutMs = 10_000) => poll('a statement at the gate', timeoutMs, () => advisoryPid(db, key, false)),
    waitedOnBy: async (pid, timeoutMs = 10_000) => {
      await poll(`a statement waiting for backend ${pid}`, timeoutMs, async () => {
        const [r] = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE pid <> $1 AND $1 = ANY(pg_blocking_pids(pid))`, [pid]);
        return r.n > 0 ? true : undefined;
      });
    },
    open: async () => {
      if (!closed) return;
      closed = false;
      try {
        await holder.query(`SELECT pg_advisory_unlock($1::int, $2::int)`, key);
        holder.release();
      } catch (e) {
        holder.release(true); // a broken connection: its session lock ends with it
        throw e;
      }
    },
  };
}

/** Writes stopped at a gate the test opens: no hold duration to guess. */
export interface WriteGate extends Omit<AdvisoryGate, 'wait' | 'notThisGate'> {
  /** Opens the gate if still closed and drops the trigger: call in a `finally`. */
  release(): Promise<void>;
}

/** As `holdWrites`, but the matching writes wait at a gate (shutGate) until `open()` instead of for a fixed time. */
export async function gateWrites(db: Db, table: string, event: 'INSERT' | 'UPDATE', when: string): Promise<WriteGate> {
  const fn = `gate_${table}_${randomBytes(6).toString('hex')}`;
  const gate = await shutGate(db);
  try {
    await db.query(`CREATE FUNCTION ${fn}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN ${gate.wait}; RETURN NEW; END $$`);
    await db.query(`CREATE TRIGGER ${fn} BEFORE ${event} ON ${table} FOR EACH ROW WHEN (${when}) EXECUTE FUNCTION ${fn}()`);
  } catch (e) {
    await gate.open();
    throw e;
  }
  return {
    reached: gate.reached,
    waitedOnBy: gate.waitedOnBy,
    open: gate.open,
    release: async () => {
      await gate.open();
      await db.query(`DROP TRIGGER ${fn} ON ${table}`);
      await db.query(`DROP FUNCTION ${fn}()`);
    },
  };
}
