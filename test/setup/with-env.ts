import { resetConfigForTests } from '../../src/config/config.module';

/**
 * Runs `fn` with these environment variables set and the configuration read afresh, then restores
 * the previous values (and drops the configuration read with them). An app or worker reads its
 * configuration while it starts, so `fn` is its start.
 */
export async function withEnv<T>(env: Record<string, string>, fn: () => Promise<T>): Promise<T> {
  const saved: Record<string, string | undefined> = {};
  for (const [k, v] of Object.entries(env)) {
    saved[k] = process.env[k];
    process.env[k] = v;
  }
  resetConfigForTests();
  try {
    return await fn();
  } finally {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
    resetConfigForTests();
  }
}
