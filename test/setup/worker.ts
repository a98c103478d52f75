import { INestApplicationContext } from '@nestjs/common';
import { resetConfigForTests } from '../../src/config/config.module';
import { startWorker } from '../../src/worker';

/**
 * A worker (`node dist/worker`'s application context, no HTTP) started with these environment
 * variables set; the previous values are restored once it has started (its configuration is
 * read at start).
 */
export async function startWorkerWith(env: Record<string, string>): Promise<INestApplicationContext> {
  const saved: Record<string, string | undefined> = {};
  for (const [k, v] of Object.entries(env)) {
    saved[k] = process.env[k];
    process.env[k] = v;
  }
  resetConfigForTests();
  try {
    return await startWorker({ logger: false });
  } finally {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
    resetConfigForTests();
  }
}
