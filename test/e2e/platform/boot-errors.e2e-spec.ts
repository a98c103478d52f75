import { randomBytes } from 'crypto';
import Redis from 'ioredis';
import { Client } from 'pg';
import { createTestApp, TestApp } from '../../setup/app';
import { eventually } from '../webhooks/webhook-helpers';

/** An instance that cannot start says why in words an operator acts on, and writes nothing. */
describe('boot errors name their cause', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp(); // the database has its signing key
  });
  afterAll(() => t.close());

  /** createTestApp with env, expected to fail (it restores the environment and closes what it opened). */
  const bootFails = async (env: Record<string, string>): Promise<Error> => {
    const started = await createTestApp(env).then(
      (a) => a,
      (e: Error) => e,
    );
    if (started instanceof Error) return started;
    await started.close();
    throw new Error('the instance started');
  };

  it('another KEY_ENCRYPTION_KEY than the one the signing keys were encrypted with is named', async () => {
    const before = await t.db.query(`SELECT kid FROM signing_keys ORDER BY kid`);
    const err = await bootFails({ KEY_ENCRYPTION_KEY: randomBytes(32).toString('base64') });
    expect(err.message).toMatch(/signing key .* cannot be decrypted .*KEY_ENCRYPTION_KEY is not the key it was encrypted with/);
    expect(await t.db.query(`SELECT kid FROM signing_keys ORDER BY kid`)).toEqual(before);
  });

  it('a database without the schema says to apply the migrations', async () => {
    const admin = new Client({ connectionString: process.env.TEST_ADMIN_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres' });
    await admin.connect();
    const name = `authp_boot_${randomBytes(4).toString('hex')}`;
    await admin.query(`CREATE DATABASE ${name}`);
    try {
      const url = new URL(process.env.DATABASE_URL!);
      url.pathname = `/${name}`;
      // Nest builds the Redis client before it meets the schema check, and hands back nothing to
      // close: the client opened meanwhile is closed all the same (left open, it kept this test
      // file's process alive for good)
      const connect = jest.spyOn(Redis.prototype, 'connect');
      let err: Error;
      let opened: Redis[];
      try {
        err = await bootFails({ DATABASE_URL: url.toString() });
      } finally {
        opened = [...(connect.mock.contexts as Redis[])];
        connect.mockRestore();
      }
      expect(err.message).toMatch(/apply the migrations first \(npm run migration:run, or node dist\/migrate\)/);
      expect(opened.length).toBeGreaterThan(0);
      await eventually(async () => opened.every((c) => c.status === 'end'), 5_000, 'the clients the failed boot opened to close');
    } finally {
      await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await admin.end();
    }
  });
});
