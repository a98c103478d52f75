import { DataSource } from 'typeorm';
import { ALL_MIGRATIONS } from '../../../migrations';

/** The migrations of this build not yet recorded as applied in `typeorm_migrations` (all of them on an empty database). */
export async function pendingMigrations(ds: DataSource): Promise<string[]> {
  const [{ exists }] = await ds.query<{ exists: boolean }[]>(`SELECT to_regclass('typeorm_migrations') IS NOT NULL AS exists`);
  const applied = new Set(exists ? (await ds.query<{ name: string }[]>(`SELECT name FROM typeorm_migrations`)).map((r) => r.name) : []);
  return ALL_MIGRATIONS.map((M) => new M().name ?? M.name).filter((name) => !applied.has(name));
}

/**
 * Refuses to run this build on a database that lacks one of its migrations: every sign-in would
 * fail on a missing column or table while /ready answered 200. A database ahead of the build (a
 * rollback after migrating, or an older instance during a rolling upgrade) is fine: migrations only
 * add what older code does not read.
 */
export async function assertSchemaCurrent(ds: DataSource): Promise<void> {
  const pending = await pendingMigrations(ds);
  if (!pending.length) return;
  const what = pending.length === ALL_MIGRATIONS.length ? 'the database has no schema yet' : `the database lacks ${pending.length} migration(s) of this version (${pending.join(', ')})`;
  throw new Error(`${what}: apply the migrations first (npm run migration:run, or node dist/migrate)`);
}
