import { createRedis } from '../../../src/shared/redis/redis.module';

/**
 * REDIS_URL naming a database the server does not have (redis://host:6379/99 on a Redis with 16):
 * ioredis reports the refused SELECT and carries on in database 0, where the keys would land beside
 * another application's while /ready said all was well. The client closes for good instead.
 */
describe('Redis: a database REDIS_URL names that the server does not have', () => {
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
      client.disconnect();
      await probe.quit();
    }
  });
});
