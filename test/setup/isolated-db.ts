import { randomBytes } from 'crypto';
import { Client } from 'pg';
import { runMigrations } from '../../src/migrate';
import { createTestApp, TestApp } from './app';

export interface IsolatedDatabase {
  url: string;
  drop: () => Promise<void>;
}

/**
 * A migrated database of the test file's own. A file that runs a worker needs one: its outbox
 * relay takes every pending row of its database, so on the run's shared database it would take
 * (and count) the rows of test files running beside it. Pass `url` as DATABASE_URL to the worker
 * (and to createTestApp when the file also runs the API); `drop()` in afterAll.
 */
export async function createIsolatedDatabase(): Promise<IsolatedDatabase> {
  const admin = process.env.TEST_ADMIN_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  const name = `${process.env.TEST_DB_NAME ?? 'authp_test'}_${randomBytes(3).toString('hex')}`;
  const run = async (sql: string) => {
    const client = new Client({ connectionString: admin });
    await client.connect();
    try {
      await client.query(sql);
    } finally {
      await client.end();
    }
  };
  await run(`CREATE DATABASE ${name}`);
  const url = new URL(admin);
  url.pathname = `/${name}`;
  await runMigrations(url.toString());
  return { url: url.toString(), drop: () => run(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`) };
}

/**
 * An API app on a migrated database of the test file's own (a test that rewrites or withdraws
 * what every file of the run would see: keys, all rows of a table). `close()` also drops it.
 */
export async function createIsolatedTestApp(env: Record<string, string> = {}): Promise<TestApp & { databaseUrl: string }> {
  const isolated = await createIsolatedDatabase();
  const t = await createTestApp({ ...env, DATABASE_URL: isolated.url });
  return {
    ...t,
    databaseUrl: isolated.url,
    close: async () => {
      await t.close();
      await isolated.drop();
    },
  };
}
