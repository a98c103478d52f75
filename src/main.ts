import cluster from 'node:cluster';
import { getConfig } from './config/config.module';
import { DEFAULT_SUPERVISOR_OPTIONS, superviseApiProcesses } from './shared/http/api-cluster';
import { installCpuProfileToggle } from './shared/http/cpu-profile';

/** `node dist/main`: the API. API_WORKERS=N runs N processes on one port (node:cluster). */
async function bootstrap(): Promise<void> {
  const config = getConfig();
  if (config.API_WORKERS > 1 && cluster.isPrimary) {
    const stop = superviseApiProcesses(cluster, config.API_WORKERS, { ...DEFAULT_SUPERVISOR_OPTIONS, log: (line) => console.error(line) });
    for (const sig of ['SIGINT', 'SIGTERM'] as const) process.on(sig, () => stop(sig));
    return;
  }
  installCpuProfileToggle(config.CPU_PROFILE_DIR);
  const { createApiApp } = await import('./app.factory');
  const app = await createApiApp();
  await app.listen({ port: config.PORT, host: process.env.HOST ?? '0.0.0.0' });
}

bootstrap().catch((err) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
