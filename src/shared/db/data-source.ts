import { DataSource } from 'typeorm';
import { AppConfig } from '../../config/config';
import { ALL_MIGRATIONS } from '../../../migrations';

/** How much longer than DATABASE_STATEMENT_TIMEOUT_MS we wait for an answer before giving a connection up. */
const QUERY_TIMEOUT_MARGIN_MS = 5_000;

/**
 * The timeouts of every runtime connection (node-postgres client settings; the server-side ones
 * are sent at connect): PostgreSQL cancels a statement that runs (or waits for a lock) longer than
 * DATABASE_STATEMENT_TIMEOUT_MS (SQLSTATE 57014) and ends a session idle in a transaction that
 * long (a transaction stuck on a Redis that hangs must not keep its row locks and hold back
 * vacuum); a query with no answer at all (a black-holed connection, which no server setting can
 * end) fails QUERY_TIMEOUT_MARGIN_MS later on our side, its connection destroyed; TCP keepalive
 * finds a dead peer of an idle connection. Migrations run without them (an index build may take long).
 */
export function connectionTimeouts(statementTimeoutMs: number | undefined): Record<string, number | boolean> {
  const keepAlive = { keepAlive: true, keepAliveInitialDelayMillis: 10_000 };
  if (!statementTimeoutMs) return keepAlive; // 0: the database role's own settings (PgBouncer, docs/scaling.md)
  return {
    ...keepAlive,
    statement_timeout: statementTimeoutMs,
    idle_in_transaction_session_timeout: statementTimeoutMs,
    query_timeout: statementTimeoutMs + QUERY_TIMEOUT_MARGIN_MS,
  };
}

/** The one TypeORM data source: owns the connection pool and the migrations (never synchronize). */
export function createDataSource(
  config: Pick<AppConfig, 'DATABASE_URL' | 'DATABASE_POOL_SIZE'> & Partial<Pick<AppConfig, 'DATABASE_CONNECT_TIMEOUT_MS' | 'DATABASE_STATEMENT_TIMEOUT_MS'>>,
): DataSource {
  return new DataSource({
    type: 'postgres',
    url: config.DATABASE_URL,
    synchronize: false,
    migrationsRun: false,
    migrations: ALL_MIGRATIONS,
    migrationsTableName: 'typeorm_migrations',
    migrationsTransactionMode: 'each',
    poolSize: config.DATABASE_POOL_SIZE,
    // connectionTimeoutMillis: a PostgreSQL that accepts connections and never answers (a network
    // black hole) fails a connection attempt, or a wait for a pooled client, after
    // DATABASE_CONNECT_TIMEOUT_MS (503 server/unavailable) instead of holding the request, or a
    // CLI command, for ever
    extra: {
      application_name: 'authp',
      idleTimeoutMillis: 30000,
      connectionTimeoutMillis: config.DATABASE_CONNECT_TIMEOUT_MS ?? 10_000,
      ...connectionTimeouts(config.DATABASE_STATEMENT_TIMEOUT_MS),
    },
  });
}
