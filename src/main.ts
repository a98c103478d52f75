import cluster from 'node:cluster';
import { getConfig } from './config/config.module';
import { installCpuProfileToggle } from './shared/http/cpu-profile';

/** `node dist/main`: the API. API_WORKERS=N runs N processes on one port (node:cluster). */
async function bootstrap(): Promise<void> {
  const config = getConfig();
  if (config.API_WORKERS > 1 && cluster.isPrimary) {
    for (let i = 0; i < config.API_WORKERS; i++) cluster.fork();
    cluster.on('exit', (worker, code, signal) => {
      if (shuttingDown) return;
      console.error(`api process ${worker.process.pid} exited (${signal ?? code}); starting another`);
      cluster.fork();
    });
    let shuttingDown = false;
    for (const sig of ['SIGINT', 'SIGTERM'] as const)
      process.on(sig, () => {
        shuttingDown = true;
        for (const w of Object.values(cluster.workers ?? {})) w?.kill(sig);
      });
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
