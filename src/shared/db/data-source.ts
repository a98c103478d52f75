import { DataSource } from 'typeorm';
import { AppConfig } from '../../config/config';
import { ALL_MIGRATIONS } from '../../../migrations';

/** The one TypeORM data source: owns the connection pool and the migrations (never synchronize). */
export function createDataSource(config: Pick<AppConfig, 'DATABASE_URL' | 'DATABASE_POOL_SIZE'>): DataSource {
  return new DataSource({
    type: 'postgres',
    url: config.DATABASE_URL,
    synchronize: false,
    migrationsRun: false,
    migrations: ALL_MIGRATIONS,
    migrationsTableName: 'typeorm_migrations',
    migrationsTransactionMode: 'each',
    poolSize: config.DATABASE_POOL_SIZE,
    extra: { application_name: 'authp', idleTimeoutMillis: 30000 },
  });
}
