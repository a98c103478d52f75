import { DataSource } from 'typeorm';
import { AppConfig } from '../../config/config';
import { ALL_MIGRATIONS } from '../../../migrations';

/** The one TypeORM data source: owns the connection pool and the migrations (never synchronize). */
export function createDataSource(config: Pick<AppConfig, 'DATABASE_URL' | 'DATABASE_POOL_SIZE'> & Partial<Pick<AppConfig, 'DATABASE_CONNECT_TIMEOUT_MS'>>): DataSource {
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
    extra: { application_name: 'authp', idleTimeoutMillis: 30000, connectionTimeoutMillis: config.DATABASE_CONNECT_TIMEOUT_MS ?? 10_000 },
  });
}
