import { Counter, Registry } from 'prom-client';

/**
 * The API's metrics registry (GET /metrics): request counts and latency (metrics.ts), the write
 * batchers' counters (db/batcher.ts) and, once startApiMetrics has run at the API's bootstrap,
 * the process's default metrics. Importing it starts nothing: the worker imports the batchers
 * (through the handlers its jobs share with the API) and has its own registry and collectors
 * (worker-health.ts).
 */
export const metricsRegistry = new Registry();

/**
 * A counter with one `outcome` label, every outcome's series there from the start at 0 (an alert
 * on a rate works from the first event), in `registry`; returns its count function.
 */
export function outcomeCounter<O extends string>(name: string, help: string, outcomes: readonly O[], registry: Registry): (outcome: O) => void {
  const counter = new Counter({ name, help, labelNames: ['outcome'] as const, registers: [registry] });
  for (const outcome of outcomes) counter.labels(outcome).inc(0);
  return (outcome) => counter.inc({ outcome });
}
