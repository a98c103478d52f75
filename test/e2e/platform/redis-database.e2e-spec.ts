import Redis from 'ioredis';
import { createRedis } from '../../../src/shared/redis/redis.module';
import { createTestApp } from '../../setup/app';
import { startWorkerWith } from '../../setup/worker';
import { withEnv } from '../../setup/with-env';
import { runCli } from '../../../src/cli';

/**
 * REDIS_URL naming a database the server does not have (redis://host:6379/99 on a Redis with 16):
 * ioredis reports the refused SELECT and carries on in database 0, where the keys would land beside
 * another application's while /ready said all was well. The client closes for good instead.
 */
describe('Redis: a database REDIS_URL names that the server does not have', () => {
  // ioredis' 2 s socket-close timers of the clients that closed themselves on the refused SELECT
  // (Jest would force-exit a worker whose last file this is)
  afterAll(() => new Promise((r) => setTimeout(r, 2_100)));

  it('closes the client: commands fail (503 upstream) instead of running in database 0', async () => {
    const base = new URL(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
    base.pathname = '/9999';
    const prefix = `${process.env.REDIS_KEY_PREFIX ?? 'authp:'}db-check:`;
    const client = createRedis({ REDIS_URL: base.toString(), REDIS_KEY_PREFIX: prefix });
    const probe = createRedis({ REDIS_URL: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', REDIS_KEY_PREFIX: prefix });
    try {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 5_000);
        client.once('end', () => {
          clearTimeout(timer);
          resolve();
        });
      });
      expect(client.status).toBe('end');
      await expect(client.set('written', '1')).rejects.toThrow(/closed/i);
      // nothing reached database 0 under this prefix
      expect(await probe.exists('written')).toBe(0);
    } finally {
      if (client.status !== 'end') client.disconnect();
      await probe.quit();
    }
  });

  // the queue connections (BullMQ's, opened from the same options) cannot close themselves like the
  // shared client: the API and the worker refuse to start instead, before any queue is used
  const missingDb = () => {
    const url = new URL(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
    url.pathname = '/9999';
    return url.toString();
  };
  const bullKeysInDb0 = async () => {
    const c = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', { db: 0 });
    try {
      return (await c.keys(`${process.env.REDIS_KEY_PREFIX ?? 'authp:'}bull:*`)).sort();
    } finally {
      c.disconnect();
    }
  };

  /** The refusal, at the start of a boot failure's message (the CLI prefixes the command's name). */
  const refusal = (prefix = '^') => {
    const url = new URL(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
    const where = `${url.hostname}:${url.port || 6379}`.replace(/[.[\]]/g, '\\$&');
    return new RegExp(`${prefix}cannot start: Redis at ${where} has no database 9999 \\(REDIS_URL\\): ERR DB index is out of range`);
  };
  /** The error a start fails with (a start that succeeds is closed and fails the test). */
  const startFailure = (start: Promise<{ close: () => Promise<unknown> }>): Promise<Error> =>
    start.then(
      async (started) => {
        await started.close();
        return new Error('it started');
      },
      (e: Error) => e,
    );

  it('the API does not start on it, says which database is missing, and writes no queue key to database 0', async () => {
    const before = await bullKeysInDb0();
    expect((await startFailure(createTestApp({ REDIS_URL: missingDb() }))).message).toMatch(refusal());
    expect(await bullKeysInDb0()).toEqual(before);
  });

  it('the worker does not start on it, and writes no queue key to database 0', async () => {
    const before = await bullKeysInDb0();
    expect((await startFailure(startWorkerWith({ REDIS_URL: missingDb() }))).message).toMatch(refusal());
    expect(await bullKeysInDb0()).toEqual(before);
  });

  it('an operator command (kek:rewrap opens the queues) refuses it too, exit code 1', async () => {
    const before = await bullKeysInDb0();
    const out: string[] = [];
    const err: string[] = [];
    const code = await withEnv({ REDIS_URL: missingDb() }, () => runCli(['kek:rewrap'], { out: (l) => out.push(l), err: (l) => err.push(l) }));
    expect(code).toBe(1);
    expect(err.join('\n')).toMatch(refusal('^kek:rewrap failed: '));
    expect(out).toEqual([]);
    expect(await bullKeysInDb0()).toEqual(before);
  });
});
