import { INestApplicationContext } from '@nestjs/common';
import { startWorker } from '../../src/worker';
import { withEnv } from './with-env';

/**
 * A worker (`node dist/worker`'s application context, no HTTP) started with these environment
 * variables set; the previous values are restored once it has started (its configuration is
 * read at start).
 */
export function startWorkerWith(env: Record<string, string>): Promise<INestApplicationContext> {
  return withEnv(env, () => startWorker({ logger: false }));
}
