import { randomBytes } from 'crypto';
import { Client } from 'pg';
import { DataSource } from 'typeorm';
import { ALL_MIGRATIONS } from '../../../migrations';
import { loadMigrationConfig } from '../../../src/config/config';
import { runMigrations } from '../../../src/migrate';
import { createDataSource } from '../../../src/shared/db/data-source';
import { createTestApp } from '../../setup/app';

const ADMIN = process.env.TEST_ADMIN_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

async function admin<T>(fn: (c: Client) => Promise<T>, url = ADMIN): Promise<T> {
  const c = new Client({ connectionString: url });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

/** An empty database of the test's own: its URL and a drop. */
async function emptyDatabase(): Promise<{ url: string; drop: () => Promise<void> }> {
  const name = `authp_mig_${randomBytes(4).toString('hex')}`;
  await admin((c) => c.query(`CREATE DATABASE ${name}`));
  const url = new URL(ADMIN);
  url.pathname = `/${name}`;
  return { url: url.toString(), drop: () => admin((c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)).then(() => undefined) };
}

/** Everything a migration creates in the public schema, as comparable text (TypeORM's bookkeeping table left out). */
async function schemaOf(url: string): Promise<Record<string, string[]>> {
  return admin(async (c) => {
    const rows = async (sql: string) => (await c.query<{ v: string }>(sql)).rows.map((r) => r.v).filter((v) => !v.includes('typeorm_migrations') && !v.includes('PK_bb2f075707dd300ba86d0208923'));
    return {
      columns: await rows(`SELECT table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable || ' ' || coalesce(column_default, '') AS v
                           FROM information_schema.columns WHERE table_schema = 'public' ORDER BY 1`),
      constraints: await rows(`SELECT conrelid::regclass || ' ' || conname || ' ' || pg_get_constraintdef(oid) AS v
                               FROM pg_constraint WHERE connamespace = 'public'::regnamespace ORDER BY 1`),
      indexes: await rows(`SELECT indexdef AS v FROM pg_indexes WHERE schemaname = 'public' ORDER BY 1`),
      functions: await rows(`SELECT p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ')' AS v FROM pg_proc p WHERE p.pronamespace = 'public'::regnamespace ORDER BY 1`),
      types: await rows(`SELECT t.typname AS v FROM pg_type t WHERE t.typnamespace = 'public'::regnamespace AND t.typtype IN ('e', 'd', 'c') AND NOT EXISTS (SELECT 1 FROM pg_class r WHERE r.reltype = t.oid) ORDER BY 1`),
      triggers: await rows(`SELECT tgrelid::regclass || ' ' || tgname AS v FROM pg_trigger WHERE NOT tgisinternal ORDER BY 1`),
      extensions: await rows(`SELECT extname AS v FROM pg_extension ORDER BY 1`),
    };
  }, url);
}

const recorded = (url: string) => admin(async (c) => (await c.query<{ name: string }>(`SELECT name FROM typeorm_migrations ORDER BY id`)).rows.map((r) => r.name), url);

/** Reverts the last `count` applied migrations (every one when omitted), one by one, through their down(). */
async function revert(url: string, count = Infinity): Promise<void> {
  const ds = await createDataSource({ DATABASE_URL: url, DATABASE_POOL_SIZE: 1 }).initialize();
  try {
    for (let i = 0; i < count && (await ds.query(`SELECT 1 FROM typeorm_migrations LIMIT 1`)).length; i++) await ds.undoLastMigration({ transaction: 'each' });
  } finally {
    await ds.destroy();
  }
}

const timestampOf = (M: (typeof ALL_MIGRATIONS)[number]) => Number(/(\d{13})$/.exec(new M().name ?? M.name)![1]);

/** Applies `migrations` (a prefix of the ordered list) as migrate would: what is not yet recorded, in order. */
async function applyOnly(url: string, migrations: typeof ALL_MIGRATIONS): Promise<void> {
  const ds = await new DataSource({ type: 'postgres', url, migrations, migrationsTableName: 'typeorm_migrations', migrationsTransactionMode: 'each' }).initialize();
  try {
    await ds.runMigrations({ transaction: 'each' });
  } finally {
    await ds.destroy();
  }
}

describe('migrations as an operator runs them', () => {
  it('two migrate runs started together on an empty database: one applies every migration, the other waits for it and applies none; each is recorded once', async () => {
    const db = await emptyDatabase();
    try {
      const runs = await Promise.all([runMigrations(db.url), runMigrations(db.url)]);
      expect(runs.map((r) => r.length).sort((a, b) => a - b)).toEqual([0, ALL_MIGRATIONS.length]);
      const names = await recorded(db.url);
      expect(names).toHaveLength(ALL_MIGRATIONS.length);
      expect(new Set(names).size).toBe(names.length);
      expect(await runMigrations(db.url)).toEqual([]);
    } finally {
      await db.drop();
    }
  });

  it("every migration's down() undoes its up() exactly: after each revert the schema is the one before that migration; reverting all leaves only the bookkeeping table", async () => {
    const db = await emptyDatabase();
    try {
      // the schema after each prefix of the migrations, applied forward
      const ordered = [...ALL_MIGRATIONS].sort((a, b) => timestampOf(a) - timestampOf(b));
      const before: Record<string, string[]>[] = [];
      for (let k = 0; k <= ordered.length; k++) {
        before.push(await schemaOf(db.url));
        if (k < ordered.length) await applyOnly(db.url, ordered.slice(0, k + 1));
      }
      // then back, one migration at a time
      for (let k = ordered.length; k > 0; k--) {
        await revert(db.url, 1);
        expect({ reverted: new ordered[k - 1]().name, schema: await schemaOf(db.url) }).toEqual({ reverted: new ordered[k - 1]().name, schema: before[k - 1] });
      }
      const { extensions, ...rest } = before[0];
      expect(rest).toEqual({ columns: [], constraints: [], indexes: [], functions: [], types: [], triggers: [] });
      expect(extensions).toEqual(['plpgsql']);
      expect(await runMigrations(db.url)).toHaveLength(ALL_MIGRATIONS.length);
      expect(await schemaOf(db.url)).toEqual(before[ordered.length]);
    } finally {
      await db.drop();
    }
    // every migration applied and reverted one by one, the schema read after each: about 12 s here
  }, 120_000);

  it('the API does not start on a database that lacks a migration of its version: it names the migration and the command', async () => {
    const db = await emptyDatabase();
    try {
      await runMigrations(db.url);
      const last = (await recorded(db.url)).pop();
      await revert(db.url, 1);
      const err = await createTestApp({ DATABASE_URL: db.url }).then(
        async (t) => {
          await t.close();
          return new Error('the API started');
        },
        (e: Error) => e,
      );
      expect(err.message).toBe(`the database lacks 1 migration(s) of this version (${last}): apply the migrations first (npm run migration:run, or node dist/migrate)`);
      await runMigrations(db.url);
      const t = await createTestApp({ DATABASE_URL: db.url });
      await t.http().get('/ready').expect(200);
      await t.close();
    } finally {
      await db.drop();
    }
  });

  it('migrate reads only DATABASE_URL: a migration job in production needs no signing-key secret, Redis or SMTP', () => {
    expect(loadMigrationConfig({ NODE_ENV: 'production', DATABASE_URL: 'postgres://migrator@db.internal:5432/authp' })).toEqual({ DATABASE_URL: 'postgres://migrator@db.internal:5432/authp' });
    expect(() => loadMigrationConfig({ NODE_ENV: 'production' })).toThrow('DATABASE_URL: must be set in production');
    expect(() => loadMigrationConfig({ NODE_ENV: 'production', DATABASE_URL: 'mysql://u:Secret@db/x' })).toThrow(/DATABASE_URL: not a valid postgres:\/\/ or postgresql:\/\/ URL/);
    expect(() => loadMigrationConfig({ NODE_ENV: 'production', DATABASE_URL: 'mysql://u:Secret@db/x' })).not.toThrow(/Secret/);
    expect(loadMigrationConfig({ NODE_ENV: 'development' }).DATABASE_URL).toMatch(/^postgres:\/\//);
  });
});
