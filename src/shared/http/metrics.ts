import type { FastifyInstance } from 'fastify';
import { Counter, Histogram, collectDefaultMetrics, Registry } from 'prom-client';

export const metricsRegistry = new Registry();
collectDefaultMetrics({ register: metricsRegistry });

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
 * Counts every request and observes its latency, labelled by route pattern (not raw URL). The
 * labelled children are kept per (method, route, status), a bounded set, so a request does not
 * hash its label object twice (prom-client's `labels()` children are meant to be reused).
 */
export function installMetrics(fastify: FastifyInstance): void {
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
