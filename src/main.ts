import cluster from 'node:cluster';
import { Logger as NestLogger } from '@nestjs/common';
import { developmentModeWarning } from './config/config';
import { getConfig } from './config/config.module';
import { DEFAULT_SUPERVISOR_OPTIONS, superviseApiProcesses } from './shared/http/api-cluster';
import { installCpuProfileToggle } from './shared/http/cpu-profile';
import { listeningUrl } from './shared/http/listening-url';
import { startupFailureLine } from './shared/redis/outage-log';

/** `node dist/main`: the API. API_WORKERS=N runs N processes on one port (node:cluster). */
async function bootstrap(): Promise<void> {
  const config = getConfig();
  if (config.API_WORKERS > 1 && cluster.isPrimary) {
    // GET /metrics in any API process answers the sum over all of them (the primary aggregates)
    const { serveClusterMetrics } = await import('./shared/http/metrics');
    serveClusterMetrics(cluster);
    const stop = superviseApiProcesses(cluster, config.API_WORKERS, { ...DEFAULT_SUPERVISOR_OPTIONS, log: (line) => console.error(line) });
    for (const sig of ['SIGINT', 'SIGTERM'] as const) process.on(sig, () => stop(sig));
    return;
  }
  installCpuProfileToggle(config.CPU_PROFILE_DIR);
  // the process collectors and, under API_WORKERS>1, the answer to the primary's metrics requests,
  // from the start of the process (installMetrics would start them too, once the app is built)
  if (config.METRICS_ENABLED) (await import('./shared/http/metrics')).startApiMetrics();
  // Nest's own logger stays silent until the app installs pino (its buffered start-up logs then
  // go to pino): a failing start is the one line below, not Nest's coloured ExceptionHandler stack
  NestLogger.overrideLogger(false);
  const { createApiApp } = await import('./app.factory');
  const app = await createApiApp();
  await app.listen({ port: config.PORT, host: process.env.HOST ?? '0.0.0.0' });
  const log = new NestLogger('Api');
  // the bound address (PORT=0 picks one), and a word when development mode looks like a deployment:
  // it accepts the development KEY_ENCRYPTION_KEY and logs mails with their links when SMTP_URL is unset
  log.log(`listening on ${listeningUrl(app.getHttpServer().address())} (NODE_ENV=${config.NODE_ENV})`);
  const warning = developmentModeWarning(config);
  if (warning) log.warn(warning);
}

bootstrap().catch((err) => {
  console.error(startupFailureLine(err, configuredUrls()));
  process.exit(1);
});

/** DATABASE_URL and REDIS_URL as the configuration has them (its defaults), or none when it is the failure. */
function configuredUrls(): { DATABASE_URL?: string; REDIS_URL?: string } {
  try {
    const { DATABASE_URL, REDIS_URL } = getConfig();
    return { DATABASE_URL, REDIS_URL };
  } catch {
    return {};
  }
}
