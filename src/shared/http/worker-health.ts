import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import { AddressInfo } from 'node:net';
import { Inject, Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import Redis from 'ioredis';
import { collectDefaultMetrics, Gauge, Registry } from 'prom-client';
import { APP_CONFIG, AppConfig } from '../../config/config';
import { Db } from '../db/db.service';
import { AppError } from '../errors/app-error';
import { renderError } from '../errors/problem';
import { OutboxRelay } from '../outbox/outbox-relay.service';
import { REDIS } from '../redis/redis.module';
import { assertMetricsReader } from './metrics-reader';
import { OutboxMetrics } from './outbox-metrics';
import { workerMetricsRegistry } from './worker-metrics';

/** How long /ready waits for each store (as the API's /ready). */
const READY_TIMEOUT_MS = 2_000;

/**
 * How long the outbox relay may go without finishing a poll before /health says the worker is
 * stuck: a poll that fails (a store away) still finishes, within the database's query timeout.
 */
export function relayStallLimitMs(config: Pick<AppConfig, 'OUTBOX_POLL_MS' | 'DATABASE_STATEMENT_TIMEOUT_MS' | 'DATABASE_CONNECT_TIMEOUT_MS'>): number {
  return Math.max(60_000, 20 * config.OUTBOX_POLL_MS, 2 * (config.DATABASE_STATEMENT_TIMEOUT_MS + config.DATABASE_CONNECT_TIMEOUT_MS));
}

let processMetrics: Registry | undefined;

/**
 * The worker process's default metrics (CPU, memory, event loop lag, GC: prom-client's
 * collectors), started on the first call: one set per process, however many worker contexts it
 * runs (tests run several). The API's collectors (metrics.ts) are never started in the worker.
 */
function workerProcessMetrics(): Registry {
  if (!processMetrics) {
    processMetrics = new Registry();
    collectDefaultMetrics({ register: processMetrics });
  }
  return processMetrics;
}

/**
 * The worker's own operations port (WORKER_HEALTH_PORT on HOST, as the API; none when unset), for an orchestrator's
 * probes and Prometheus, as the API's /health, /ready and /metrics:
 * - GET /health: liveness. 200 while the process answers and its outbox relay finishes a poll
 *   now and then; 503 once the relay has been stuck past relayStallLimitMs (a restart helps).
 *   A PostgreSQL or Redis outage does not fail it (a restart would not help).
 * - GET /ready: 200 when PostgreSQL and Redis answer, else 503 naming the one that does not.
 * - GET /metrics: the worker process's metrics (CPU, memory, event loop, GC: collectors started
 *   here, only when this port serves /metrics), rows relayed, age of the relay's last poll, mail
 *   and webhook delivery outcomes (worker-metrics.ts), and the outbox backlog; METRICS_ENABLED
 *   and METRICS_TOKEN as the API.
 * Errors are problem+json, as the API's. Plain node:http: the worker has no Fastify.
 */
@Injectable()
export class WorkerHealthServer implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly log = new Logger(WorkerHealthServer.name);
  private server?: Server;
  /** this worker's relay gauges; the process's metrics are workerProcessMetrics(), started when /metrics is served */
  private readonly registry = new Registry();
  private processRegistry?: Registry;
  private readonly outbox = new OutboxMetrics();

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly relay: OutboxRelay,
    private readonly db: Db,
    @Inject(REDIS) private readonly redis: Redis,
  ) {
    const relayed = this.relay;
    new Gauge({ name: 'authp_worker_outbox_relayed_rows', help: 'Outbox rows this worker process relayed to the queues since it started', registers: [this.registry], collect() { this.set(relayed.dispatched); } });
    new Gauge({ name: 'authp_worker_outbox_last_poll_age_seconds', help: "Seconds since this worker's outbox relay last finished a poll", registers: [this.registry], collect() { this.set(relayed.lastPollAgeMs() / 1000); } });
  }

  async onApplicationBootstrap(): Promise<void> {
    const port = this.config.WORKER_HEALTH_PORT;
    if (port === undefined) return;
    if (this.config.METRICS_ENABLED) this.processRegistry = workerProcessMetrics();
    const host = process.env.HOST ?? '0.0.0.0';
    const server = createServer((req, res) => void this.handle(req, res));
    server.keepAliveTimeout = 5_000;
    server.requestTimeout = 10_000;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    this.server = server;
    this.log.log(`worker health on ${host}:${this.port()} (/health, /ready, /metrics)`);
  }

  async onApplicationShutdown(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /** The port listened on (WORKER_HEALTH_PORT=0 picks a free one), or undefined. */
  port(): number | undefined {
    return (this.server?.address() as AddressInfo | null)?.port;
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?')[0];
    try {
      if (req.method !== 'GET' && req.method !== 'HEAD') {
        throw new AppError(['/health', '/ready', '/metrics'].includes(path) ? 'request/method_not_allowed' : 'request/not_found', undefined, { headers: { Allow: 'GET, HEAD' } });
      }
      if (path === '/health') return this.json(req, res, ...this.liveness());
      if (path === '/ready') return this.json(req, res, 200, await this.readiness());
      if (path === '/metrics' && this.config.METRICS_ENABLED) return this.send(req, res, 200, 'text/plain; version=0.0.4', await this.metrics(req.headers.authorization));
      throw new AppError('request/not_found');
    } catch (err) {
      const r = renderError(err instanceof AppError ? err : new AppError('server/error', undefined, { logged: false }), path);
      if (!(err instanceof AppError)) this.log.error({ err, path }, 'worker health request failed');
      this.send(req, res, r.status, r.contentType, JSON.stringify(r.body), r.headers);
    }
  }

  private liveness(): [number, Record<string, unknown>] {
    const age = this.relay.lastPollAgeMs();
    const limit = relayStallLimitMs(this.config);
    if (age > limit) {
      throw new AppError('server/unavailable', `the outbox relay has not finished a poll for ${Math.round(age / 1000)} s (limit ${limit / 1000} s)`, { logged: true });
    }
    return [200, { status: 'ok' }];
  }

  private async readiness(): Promise<Record<string, unknown>> {
    const [postgres, redis] = await Promise.all([
      // the wait for a connection included, and on the probes' own (Db.ping): the relay and the
      // consumers holding the pool's connections leave /ready answering within READY_TIMEOUT_MS
      check(() => this.db.ping(READY_TIMEOUT_MS)),
      check(() => withTimeout(this.redis.ping(), READY_TIMEOUT_MS)),
    ]);
    const down = [postgres ? 'postgres' : undefined, redis ? 'redis' : undefined].filter(Boolean);
    if (down.length) throw new AppError('server/unavailable', `unreachable: ${down.join(', ')}`, { logged: true });
    return { status: 'ok', details: { postgres: { status: 'up' }, redis: { status: 'up' } } };
  }

  private async metrics(authorization: string | undefined): Promise<string> {
    assertMetricsReader(this.config.METRICS_TOKEN, authorization);
    const parts = await Promise.all([this.processRegistry?.metrics() ?? '', this.registry.metrics(), workerMetricsRegistry.metrics(), this.outbox.text(this.db)]);
    return parts.filter(Boolean).map((p) => (p.endsWith('\n') ? p : `${p}\n`)).join('');
  }

  private json(req: IncomingMessage, res: ServerResponse, status: number, body: Record<string, unknown>): void {
    this.send(req, res, status, 'application/json; charset=utf-8', JSON.stringify(body));
  }

  private send(req: IncomingMessage, res: ServerResponse, status: number, type: string, body: string, headers: Record<string, string> = {}): void {
    res.writeHead(status, { ...headers, 'Content-Type': type, 'Content-Length': Buffer.byteLength(body), 'Cache-Control': 'no-store' });
    res.end(req.method === 'HEAD' ? undefined : body);
  }
}

/** The error of a check, or undefined when it passed. */
async function check(fn: () => Promise<unknown>): Promise<Error | undefined> {
  try {
    await fn();
    return undefined;
  } catch (e) {
    return e instanceof Error ? e : new Error(String(e));
  }
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([p, new Promise<T>((_, reject) => { timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms); })]).finally(() => clearTimeout(timer));
}
