import { randomBytes } from 'crypto';
import { Client } from 'pg';
import { createTestApp, TestApp } from '../../setup/app';

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
      const err = await bootFails({ DATABASE_URL: url.toString() });
      expect(err.message).toMatch(/apply the migrations first \(npm run migration:run, or node dist\/migrate\)/);
    } finally {
      await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await admin.end();
    }
  });
});
