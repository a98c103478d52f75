import { Job, Queue, RedisClient, Worker } from 'bullmq';
import { bullConnection } from '../../../src/shared/outbox/bull-options';
import { closeWorker } from '../../../src/shared/outbox/close-worker';
import { ownRedis } from '../../setup/own-redis';
import { eventually } from '../webhooks/webhook-helpers';

/**
 * A worker closing (a SIGTERM, a test's app.close()) while its Redis connections reconnect. BullMQ's
 * close() waits for its blocking connection's 'end', which a connection between two reconnection
 * attempts never emits: the shutdown hung for good (seen once in CI, a close right after a Redis
 * restart). closeWorker waits for the connections, and gives up waiting on jobs when Redis stays away.
 */
describe('closing a queue worker while Redis reconnects', () => {
  const cleanups: Array<() => unknown> = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });

  async function setUp(processor: (job: Job) => Promise<unknown>) {
    const { port, startRedis, ping } = await ownRedis();
    let server = startRedis();
    cleanups.push(() => server.kill('SIGKILL'));
    await eventually(ping, 10_000, 'redis-server to start');
    const connection = bullConnection({ REDIS_URL: `redis://127.0.0.1:${port}` });
    const worker = new Worker('close-probe', processor, { connection, prefix: 'closeprobe' });
    worker.on('error', () => undefined);
    await worker.waitUntilReady();
    const [main, blocking] = await Promise.all([worker.backend.client, worker.backend.blockingClient as Promise<RedisClient>]);
    return {
      main,
      port,
      worker,
      blocking,
      connection,
      kill: () => server.kill('SIGKILL'),
      restart: async () => {
        server = startRedis();
        await eventually(ping, 10_000, 'redis-server to restart');
      },
    };
  }

  it('Redis away: the close stops waiting for the connections after its grace and resolves (BullMQ alone waits forever)', async () => {
    const r = await setUp(async () => undefined);
    r.kill();
    // between two reconnection attempts: no socket, so no 'end' to wait for
    await eventually(async () => r.blocking.status === 'reconnecting', 10_000, 'the blocking connection to reconnect');
    await closeWorker(r.worker, 1000);
    expect(r.blocking.status).toBe('end');
    expect(r.main.status).toBe('end');
    // and they stay ended: nothing reconnects them (a reconnecting client would keep a closing
    // process alive). Watched past BullMQ's guard on a blocking wait (its timeout + 1 s, ~6 s),
    // which, when it fires while the close runs, leaves the main loop waiting on a connection that
    // never comes back: a promise that never settles, holding no socket or timer.
    const statuses = new Set<string>();
    for (const until = Date.now() + 7000; Date.now() < until; ) {
      statuses.add(`${r.blocking.status}/${r.main.status}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect([...statuses]).toEqual(['end/end']);
  }, 40_000);

  it('Redis back: the close waits for the connections, then for the job running, and ends them', async () => {
    let release: () => void = () => undefined;
    let started = false;
    let finished = false;
    const r = await setUp(async () => {
      started = true;
      await new Promise<void>((resolve) => (release = resolve));
      finished = true;
    });
    const queue = new Queue('close-probe', { connection: r.connection, prefix: 'closeprobe' });
    queue.on('error', () => undefined);
    cleanups.push(() => queue.close().catch(() => undefined));
    await queue.add('probe', {});
    await eventually(async () => started, 10_000, 'the job to start');
    r.kill();
    await eventually(async () => r.blocking.status === 'reconnecting', 10_000, 'the blocking connection to reconnect');
    await r.restart();
    let closed = false;
    const closing = closeWorker(r.worker).then(() => (closed = true));
    await new Promise((resolve) => setTimeout(resolve, 500));
    // the job still runs: the close waits for it
    expect(closed).toBe(false);
    release();
    await closing;
    expect(finished).toBe(true);
    expect(r.worker.isRunning()).toBe(false);
    expect(r.blocking.status).toBe('end');
    expect(r.main.status).toBe('end');
  }, 30_000);
});
