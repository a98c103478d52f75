import { INestApplicationContext } from '@nestjs/common';
import { ownRedis } from '../../setup/own-redis';
import { startWorkerWith } from '../../setup/worker';
import { createIsolatedDatabase, eventually, sleep } from '../webhooks/webhook-helpers';

/**
 * A worker started while Redis is down waits for it without flooding the log: BullMQ prints an
 * 'error' its queue has no listener for as a raw multi-line stack trace (console.error), once per
 * reconnection attempt, so every queue must have its outage listener from its construction on.
 */
describe('worker: Redis down at start', () => {
  let db: { url: string; drop: () => Promise<void> };
  beforeAll(async () => {
    db = await createIsolatedDatabase('redisdown');
  });
  afterAll(() => db.drop());

  it('says once that it waits, prints no raw connection stack traces while it does, and starts once Redis is up', async () => {
    const { port, startRedis, ping } = await ownRedis();
    const raw: string[] = [];
    const errorSpy = jest.spyOn(console, 'error').mockImplementation((...args: unknown[]) => {
      raw.push(args.map((a) => (a instanceof Error ? `${a.stack}` : String(a))).join(' '));
    });
    const stderrWrite = process.stderr.write.bind(process.stderr);
    const stderrSpy = jest.spyOn(process.stderr, 'write').mockImplementation(((chunk: unknown, ...rest: unknown[]) => {
      raw.push(String(chunk));
      return (stderrWrite as (...a: unknown[]) => boolean)(chunk, ...rest);
    }) as typeof process.stderr.write);
    let server: ReturnType<typeof startRedis> | undefined;
    let worker: INestApplicationContext | undefined;
    try {
      let failed: unknown;
      const started = startWorkerWith({ DATABASE_URL: db.url, REDIS_URL: `redis://127.0.0.1:${port}` }).then(
        (w) => (worker = w),
        (e) => {
          failed = e;
        },
      );
      await sleep(4_000); // several reconnection attempts of every queue
      // one line says why nothing happens yet; no stack trace of any connection attempt
      const waiting = raw.filter((l) => /waiting for it/.test(l));
      expect(waiting).toEqual([expect.stringMatching(new RegExp(`^worker: Redis at 127\\.0\\.0\\.1:${port} \\(REDIS_URL\\) is unreachable \\(.*ECONNREFUSED.*\\); waiting for it`))]);
      expect(raw.filter((l) => /ECONNREFUSED/.test(l) && !waiting.includes(l))).toEqual([]);
      server = startRedis();
      await eventually(ping, 10_000, 'own Redis up');
      await started;
      expect(failed).toBeUndefined();
      expect(worker).toBeDefined();
    } finally {
      errorSpy.mockRestore();
      stderrSpy.mockRestore();
      await worker?.close();
      server?.kill('SIGKILL');
    }
  }, 60_000);
});
