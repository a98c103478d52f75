import Redis from 'ioredis';
import { Client } from 'pg';

/** Drops this run's database and Redis keys. */
export default async function globalTeardown(): Promise<void> {
  const admin = process.env.TEST_ADMIN_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  const dbName = process.env.TEST_DB_NAME;
  if (dbName && !process.env.KEEP_TEST_DB) {
    const client = new Client({ connectionString: admin });
    await client.connect();
    await client.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
    await client.end();
  }
  const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
  const stream = redis.scanStream({ match: `authp_test_${process.env.TEST_RUN_ID}*`, count: 1000 });
  for await (const keys of stream) if ((keys as string[]).length) await redis.del(...(keys as string[]));
  await redis.quit();
}
