import { Inject, Injectable, Logger, OnApplicationShutdown } from '@nestjs/common';
import { Pool, type PoolClient, type QueryResultRow } from 'pg';
import { DataSource } from 'typeorm';

export const DATA_SOURCE = Symbol('DATA_SOURCE');

/** Runs parameterized SQL; `name` makes it a named prepared statement (hot paths). */
export interface Queryable {
  query<T extends QueryResultRow = QueryResultRow>(text: string, params?: unknown[], name?: string): Promise<T[]>;
  /** The number of rows an UPDATE/DELETE touched, with its RETURNING rows. */
  exec<T extends QueryResultRow = QueryResultRow>(text: string, params?: unknown[], name?: string): Promise<{ rowCount: number; rows: T[] }>;
}

function wrap(client: Pool | PoolClient): Queryable {
  return {
    async query<T extends QueryResultRow>(text: string, params: unknown[] = [], name?: string): Promise<T[]> {
      const res = await client.query<T>(name ? { name, text, values: params } : { text, values: params });
      return res.rows;
    },
    async exec<T extends QueryResultRow>(text: string, params: unknown[] = [], name?: string) {
      const res = await client.query<T>(name ? { name, text, values: params } : { text, values: params });
      return { rowCount: res.rowCount ?? 0, rows: res.rows };
    },
  };
}

/**
 * Database access for every module: explicit SQL on the TypeORM data source's pg pool.
 * `tx` runs a function in one transaction (state change + audit + outbox commit together).
 */
@Injectable()
export class Db implements Queryable, OnApplicationShutdown {
  readonly pool: Pool;
  private readonly direct: Queryable;

  /**
   * Writes whose loss in a database crash is harmless and visible to the client (a guest's first
   * session: its refresh then fails with 401 and the spec tells the client to create a new guest)
   * commit without waiting for the WAL flush (synchronous_commit=off), so a tenant's hot counter
   * row is locked for microseconds instead of a disk flush. Everything else commits synchronously.
   */
  readonly ephemeral: Queryable;
  private readonly ephemeralPool: Pool;

  /**
   * The readiness probes' own connection (`ping`): /ready asks "does PostgreSQL answer?", and on
   * the main pool that question queued behind the requests for a free connection whenever they
   * held all DATABASE_POOL_SIZE (a lock wait, a slow query wave), up to DATABASE_CONNECT_TIMEOUT_MS
   * (node-postgres' query_timeout only starts once a connection is checked out). Every instance
   * then failed its probes at once over a busy pool, not a database away, and each probe took a
   * slot from the requests when one came free. One connection of its own, opened on the first
   * probe (idle ones close after the pool's idle timeout).
   */
  private readonly probePool: Pool;

  constructor(@Inject(DATA_SOURCE) readonly dataSource: DataSource) {
    this.pool = (dataSource.driver as unknown as { master: Pool }).master;
    this.direct = wrap(this.pool);
    const { url, extra } = dataSource.options as { url?: string; extra?: Record<string, unknown> & { application_name?: string } };
    // the main pool's settings (timeouts included), another name, commits without the WAL flush
    this.ephemeralPool = new Pool({ ...extra, connectionString: url, max: 8, application_name: 'authp-ephemeral', options: '-c synchronous_commit=off' });
    this.ephemeral = wrap(this.ephemeralPool);
    this.probePool = new Pool({ ...extra, connectionString: url, max: 1, application_name: 'authp-probe' });
    // an idle pooled connection the server ends (restart, failover, pg_terminate_backend) emits
    // 'error' on its pool; unhandled, that event would end the process. The pool drops the client
    // and the next query opens a new connection, so logging it is all there is to do.
    for (const [name, pool] of [['main', this.pool], ['ephemeral', this.ephemeralPool], ['probe', this.probePool]] as const)
      pool.on('error', (err) => this.log.warn(`idle PostgreSQL connection (${name} pool) lost: ${err.message}`));
  }

  private readonly log = new Logger('Db');

  query<T extends QueryResultRow = QueryResultRow>(text: string, params?: unknown[], name?: string): Promise<T[]> {
    return this.direct.query<T>(text, params, name);
  }

  exec<T extends QueryResultRow = QueryResultRow>(text: string, params?: unknown[], name?: string) {
    return this.direct.exec<T>(text, params, name);
  }

  /**
   * A readiness probe: resolves when PostgreSQL answers `SELECT 1` within `timeoutMs`, rejects
   * otherwise, whatever held it: opening the connection (a server that accepts and then never
   * answers, which the pool's connect timeout would wait out), a probe before it still on the one
   * probe connection, or the query itself (query_timeout then also destroys that connection).
   * Never uses the main pool, so a saturated pool does not read as a database away.
   */
  async ping(timeoutMs: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`PostgreSQL did not answer within ${timeoutMs} ms`)), timeoutMs);
    });
    const query: Promise<unknown> = this.probePool.query({ text: 'SELECT 1', query_timeout: timeoutMs } as never);
    query.catch(() => undefined); // settled after the deadline won: nobody waits for it any more
    try {
      await Promise.race([query, deadline]);
    } finally {
      clearTimeout(timer);
    }
  }

  async tx<T>(fn: (tx: Queryable) => Promise<T>, isolation: 'READ COMMITTED' | 'SERIALIZABLE' = 'READ COMMITTED'): Promise<T> {
    const client = await this.pool.connect();
    // a checked-out client has no pool listener: the server ending its connection (a restart, a
    // failover, pg_terminate_backend) while the transaction is open would emit 'error' with no
    // listener and end the process. The transaction fails instead (its statements reject; the
    // server rolled it back) and the connection is dropped, never returned to the pool.
    let lost: Error | undefined;
    const onError = (err: Error) => {
      lost = err;
      this.log.warn(`PostgreSQL connection lost in a transaction: ${err.message}`);
    };
    client.on('error', onError);
    try {
      await client.query(isolation === 'READ COMMITTED' ? 'BEGIN' : `BEGIN ISOLATION LEVEL ${isolation}`);
      const result = await fn(wrap(client));
      await client.query('COMMIT');
      return result;
    } catch (err) {
      // no answer in time (node-postgres query_timeout): the connection may still be waiting for one,
      // so it is destroyed rather than rolled back and returned to the pool
      if (!lost && (err as Error)?.message === QUERY_READ_TIMEOUT) lost = err as Error;
      // a connection that cannot even roll back is not returned to the pool either
      if (!lost) await client.query('ROLLBACK').catch((e: Error) => (lost = e));
      throw err;
    } finally {
      client.removeListener('error', onError);
      client.release(lost);
    }
  }

  async onApplicationShutdown(): Promise<void> {
    await this.ephemeralPool.end().catch(() => undefined);
    await this.probePool.end().catch(() => undefined);
    if (this.dataSource.isInitialized) await this.dataSource.destroy();
  }
}

/** node-postgres's error when a query got no answer within query_timeout. */
export const QUERY_READ_TIMEOUT = 'Query read timeout';

/** Postgres error code of a unique violation. */
export const UNIQUE_VIOLATION = '23505';
export function isUniqueViolation(err: unknown, constraint?: string): boolean {
  const e = err as { code?: string; constraint?: string };
  return e?.code === UNIQUE_VIOLATION && (!constraint || e.constraint === constraint);
}
