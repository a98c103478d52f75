import { randomBytes } from 'crypto';
import { Client } from 'pg';

/** Creates a fresh database for this run, applies the migrations, picks a Redis key prefix. */
export default async function globalSetup(): Promise<void> {
  const admin = process.env.TEST_ADMIN_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  const runId = `${Date.now().toString(36)}_${randomBytes(3).toString('hex')}`;
  const dbName = `authp_test_${runId}`;
  const client = new Client({ connectionString: admin });
  await client.connect();
  await client.query(`CREATE DATABASE ${dbName}`);
  await client.end();
  const url = new URL(admin);
  url.pathname = `/${dbName}`;
  process.env.DATABASE_URL = url.toString();
  process.env.TEST_DB_NAME = dbName;
  process.env.TEST_RUN_ID = runId;
  process.env.NODE_ENV = 'test';
  const { runMigrations } = await import('../../src/migrate');
  await runMigrations(process.env.DATABASE_URL);
}
