import { INestApplicationContext } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Logger } from 'nestjs-pino';
import { getConfig } from './config/config.module';
import { startupFailureLine } from './shared/redis/outage-log';
import { assertRedisDatabase, closeRedisIfBootFails } from './shared/redis/redis.module';
import { WorkerModule } from './worker.module';

/** Beyond this, a shutdown that waits on a stuck job gives up (compose allows 30 s). */
const SHUTDOWN_TIMEOUT_MS = 25_000;

/**
 * Boots the worker: the outbox relay polls and the BullMQ processors consume. `node dist/worker`
 * calls it with shutdown hooks; tests call it in-process and close the context themselves.
 */
export async function startWorker(opts: { logger?: boolean; shutdownHooks?: boolean } = {}): Promise<INestApplicationContext> {
  const quiet = opts.logger === false;
  // before any queue is built: BullMQ's connections would carry on in database 0 (see the check)
  const redis = await assertRedisDatabase(getConfig());
  // the worker waits for an unreachable Redis (its queues connect as it comes): said once, so
  // an operator does not meet a silent process without its health port
  if (redis.unreachable) {
    console.error(`worker: Redis at ${redis.where} (REDIS_URL) is unreachable (${redis.unreachable}); waiting for it: the worker starts, and opens WORKER_HEALTH_PORT, once Redis answers`);
  }
  // otherwise Nest's logger is silent until pino is installed (its buffered start-up logs then go
  // to pino): a failing start is one plain line (startupFailureLine), not Nest's coloured stack
  const app = await closeRedisIfBootFails(() =>
    NestFactory.createApplicationContext(WorkerModule, quiet ? { logger: false, abortOnError: false } : { logger: false, bufferLogs: true, abortOnError: false }),
  );
  if (!quiet) app.useLogger(app.get(Logger));
  // SIGTERM/SIGINT: app.close() stops the relay (onModuleDestroy), lets the workers finish
  // their jobs (beforeApplicationShutdown), then closes PostgreSQL and Redis; Nest then
  // re-raises the signal and the process exits.
  if (opts.shutdownHooks) app.enableShutdownHooks(['SIGTERM', 'SIGINT']);
  return app;
}

if (require.main === module || process.argv[1]?.endsWith('dist/worker.js') || process.argv[1]?.endsWith('dist/worker')) {
  // the configuration first, as the API does: a bad one is its list of problems, not a Nest stack trace
  Promise.resolve()
    .then(() => getConfig())
    .then(() => startWorker({ shutdownHooks: true }))
    .then((app) => {
      app.get(Logger).log('worker started', 'Worker');
      for (const sig of ['SIGTERM', 'SIGINT'] as const)
        process.once(sig, () => {
          setTimeout(() => {
            console.error(`worker did not stop within ${SHUTDOWN_TIMEOUT_MS} ms of ${sig}; exiting`);
            process.exit(1);
          }, SHUTDOWN_TIMEOUT_MS).unref();
        });
    })
    .catch((err) => {
      let urls: { DATABASE_URL?: string; REDIS_URL?: string } = {};
      try {
        urls = getConfig();
      } catch {
        // the configuration is the failure: its message says what is wrong
      }
      console.error(startupFailureLine(err, urls));
      process.exit(1);
    });
}
