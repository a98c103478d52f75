import { getConfig } from './config/config.module';
import { createDataSource } from './shared/db/data-source';

/** `npm run migration:run`: applies pending migrations to DATABASE_URL. */
export async function runMigrations(databaseUrl?: string): Promise<string[]> {
  const config = getConfig();
  const ds = createDataSource({ DATABASE_URL: databaseUrl ?? config.DATABASE_URL, DATABASE_POOL_SIZE: 2 });
  await ds.initialize();
  try {
    const done = await ds.runMigrations({ transaction: 'each' });
    return done.map((m) => m.name);
  } finally {
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
