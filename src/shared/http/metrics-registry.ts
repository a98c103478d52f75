import { Registry } from 'prom-client';

/**
 * The API's metrics registry (GET /metrics): request counts and latency (metrics.ts), the write
 * batchers' counters (db/batcher.ts) and, once startApiMetrics has run at the API's bootstrap,
 * the process's default metrics. Importing it starts nothing: the worker imports the batchers
 * (through the handlers its jobs share with the API) and has its own registry and collectors
 * (worker-health.ts).
 */
export const metricsRegistry = new Registry();
