import cluster from 'node:cluster';
import type { FastifyInstance } from 'fastify';
import { AggregatorRegistry, Counter, Histogram, collectDefaultMetrics } from 'prom-client';
import { metricsRegistry } from './metrics-registry';

export { metricsRegistry };

let started = false;

/**
 * Starts what the API's /metrics reports beyond its counters, once per process, at the API's
 * bootstrap (installMetrics), never on import: the process's default collectors (CPU, memory,
 * event loop lag, GC) on metricsRegistry and, in an API process of API_WORKERS>1, prom-client's
 * answer to the primary's requests for that registry. The worker, which imports the batchers
 * (and so metricsRegistry), starts none of this.
 */
export function startApiMetrics(): void {
  if (started) return;
  started = true;
  collectDefaultMetrics({ register: metricsRegistry });
  if (cluster.isWorker) {
    AggregatorRegistry.setRegistries([metricsRegistry]);
    new AggregatorRegistry(); // installs that listener (once per process)
  }
}

export const CLUSTER_METRICS_REQUEST = 'authp:cluster-metrics-request';
export const CLUSTER_METRICS_REPLY = 'authp:cluster-metrics-reply';
interface MetricsRequest { type: typeof CLUSTER_METRICS_REQUEST; id: number }
interface MetricsReply { type: typeof CLUSTER_METRICS_REPLY; id: number; text?: string; error?: string }

/**
 * The primary of API_WORKERS>1 (it serves no HTTP): answers an API process's request for the
 * metrics of every API process, summed by prom-client's AggregatorRegistry (which asks each
 * process over cluster IPC). Counters then never go down between scrapes, whichever process a
 * scrape reaches. `aggregate` is injectable for tests.
 */
export function serveClusterMetrics(
  primary: { on(event: 'message', l: (worker: { send(msg: unknown): unknown }, msg: unknown) => void): unknown },
  aggregate: () => Promise<string> = (() => {
    const agg = new AggregatorRegistry();
    return () => agg.clusterMetrics();
  })(),
): void {
  primary.on('message', (worker, msg) => {
    const m = msg as Partial<MetricsRequest> | null;
    if (!m || m.type !== CLUSTER_METRICS_REQUEST || typeof m.id !== 'number') return;
    const id = m.id;
    aggregate().then(
      (text) => worker.send({ type: CLUSTER_METRICS_REPLY, id, text } satisfies MetricsReply),
      (err: Error) => worker.send({ type: CLUSTER_METRICS_REPLY, id, error: err.message } satisfies MetricsReply),
    );
  });
}

/**
 * In an API process of API_WORKERS>1: asks the primary for the cluster's metrics and waits for its
 * reply (at most `timeoutMs`; prom-client's own limit per request is 5 s). Injectable for tests.
 */
export function clusterMetricsRequester(
  proc: { send(msg: unknown): unknown; on(event: 'message', l: (msg: unknown) => void): unknown },
  timeoutMs = 6_000,
): () => Promise<string> {
  let next = 0;
  const pending = new Map<number, { resolve: (t: string) => void; reject: (e: Error) => void; timer: NodeJS.Timeout }>();
  proc.on('message', (msg) => {
    const m = msg as Partial<MetricsReply> | null;
    if (!m || m.type !== CLUSTER_METRICS_REPLY || typeof m.id !== 'number') return;
    const p = pending.get(m.id);
    if (!p) return;
    pending.delete(m.id);
    clearTimeout(p.timer);
    if (typeof m.text === 'string') p.resolve(m.text);
    else p.reject(new Error(`cluster metrics: ${m.error ?? 'no answer'}`));
  });
  return () =>
    new Promise<string>((resolve, reject) => {
      const id = next++;
      const timer = setTimeout(() => {
        pending.delete(id);
        reject(new Error(`cluster metrics: the primary did not answer within ${timeoutMs} ms`));
      }, timeoutMs);
      timer.unref();
      pending.set(id, { resolve, reject, timer });
      proc.send({ type: CLUSTER_METRICS_REQUEST, id } satisfies MetricsRequest);
    });
}

let fromPrimary: (() => Promise<string>) | undefined;

/** What GET /metrics answers: this process's metrics, or with API_WORKERS>1 those of every API process summed. */
export function metricsText(): Promise<string> {
  if (cluster.isWorker && process.send) {
    fromPrimary ??= clusterMetricsRequester(process as unknown as Parameters<typeof clusterMetricsRequester>[0]);
    return fromPrimary();
  }
  return metricsRegistry.metrics();
}

const requests = new Counter({
  name: 'http_requests_total',
  help: 'HTTP requests by method, route and status',
  labelNames: ['method', 'route', 'status'] as const,
  registers: [metricsRegistry],
});
const latency = new Histogram({
  name: 'http_request_duration_seconds',
  help: 'HTTP request latency by method and route',
  labelNames: ['method', 'route'] as const,
  buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
  registers: [metricsRegistry],
});

/**
 * The API's metrics (METRICS_ENABLED): starts the process collectors (startApiMetrics), then counts
 * every request and observes its latency, labelled by route pattern (not raw URL). The labelled
 * children are kept per (method, route, status), a bounded set, so a request does not hash its
 * label object twice (prom-client's `labels()` children are meant to be reused).
 */
export function installMetrics(fastify: FastifyInstance): void {
  startApiMetrics();
  const children = new Map<string, { count: { inc: () => void }; latency: { observe: (v: number) => void } }>();
  fastify.addHook('onResponse', (req, reply, done) => {
    const route = req.routeOptions?.url ?? 'unmatched';
    const status = String(reply.statusCode);
    const key = `${req.method} ${status} ${route}`;
    let child = children.get(key);
    if (!child) {
      child = { count: requests.labels(req.method, route, status), latency: latency.labels(req.method, route) };
      children.set(key, child);
    }
    child.count.inc();
    child.latency.observe(reply.elapsedTime / 1000);
    done();
  });
}
