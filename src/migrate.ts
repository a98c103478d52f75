import { loadMigrationConfig } from './config/config';
import { createDataSource } from './shared/db/data-source';

/**
 * The session-level advisory lock every `migrate` holds while it runs: a second one started at the
 * same time (instances started together, a retried job) waits for the first, then finds nothing
 * left to apply, instead of running the same migrations beside it. Needs a direct connection to
 * the primary (a transaction-pooling PgBouncer would not keep the session; docs/scaling.md).
 */
const MIGRATION_TRY_LOCK_SQL = `SELECT pg_try_advisory_lock(hashtextextended('authp:migrations', 0)) AS locked`;
/**
 * How often a waiting migrate tries the lock again. It polls rather than blocks in
 * pg_advisory_lock: a statement blocked for the whole run would be a transaction in progress that
 * CREATE INDEX CONCURRENTLY (in the running migrate) waits for, while it waits for the lock: the
 * two would wait on each other for ever.
 */
const MIGRATION_LOCK_POLL_MS = 250;
const MIGRATION_UNLOCK_SQL = `SELECT pg_advisory_unlock(hashtextextended('authp:migrations', 0))`;

/** `npm run migration:run`: applies pending migrations to DATABASE_URL (the only setting it reads). */
export async function runMigrations(databaseUrl?: string): Promise<string[]> {
  const ds = createDataSource({ DATABASE_URL: databaseUrl ?? loadMigrationConfig().DATABASE_URL, DATABASE_POOL_SIZE: 2 });
  await ds.initialize();
  const lock = ds.createQueryRunner();
  try {
    await lock.connect();
    while (!(await lock.query(MIGRATION_TRY_LOCK_SQL))[0].locked) await new Promise((r) => setTimeout(r, MIGRATION_LOCK_POLL_MS));
    try {
      const done = await ds.runMigrations({ transaction: 'each' });
      return done.map((m) => m.name);
    } finally {
      await lock.query(MIGRATION_UNLOCK_SQL);
    }
  } finally {
    await lock.release();
    await ds.destroy();
  }
}

if (require.main === module || process.argv[1]?.endsWith('dist/migrate.js') || process.argv[1]?.endsWith('dist/migrate')) {
  runMigrations()
    .then((names) => {
      console.warn(names.length ? `applied: ${names.join(', ')}` : 'database is up to date');
      process.exit(0);
    })
    .catch((err) => {
      console.error(`migration failed: ${err instanceof Error ? err.message : err}`);
      process.exit(1);
    });
}
