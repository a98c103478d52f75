/**
 * The worker imports the API's write batchers (the guest sign-in handler its jobs share with the
 * API), whose counters live in the API's metrics registry. Importing them must not start the
 * API's metric collectors (a second event-loop monitor and GC observer in the worker): the API
 * starts them at its bootstrap (startApiMetrics), the worker its own (worker-health.ts).
 */
const mockCollectDefaultMetrics = jest.fn();
jest.mock('prom-client', () => {
  const actual = jest.requireActual<typeof import('prom-client')>('prom-client');
  return {
    ...actual,
    collectDefaultMetrics: (...args: Parameters<typeof actual.collectDefaultMetrics>) => {
      mockCollectDefaultMetrics(...args);
      return actual.collectDefaultMetrics(...args);
    },
  };
});

describe('metric collectors', () => {
  beforeAll(() => {
    process.env.NODE_ENV = 'test';
  });

  it("importing the worker's module graph starts no collector", async () => {
    const { WorkerModule } = await import('./worker.module');
    expect(WorkerModule).toBeDefined();
    expect(mockCollectDefaultMetrics).not.toHaveBeenCalled();
    const { metricsRegistry } = await import('./shared/http/metrics-registry');
    // the batchers were imported (their counters are registered), and no default metric is there
    expect(metricsRegistry.getSingleMetric('db_batch_statements_total')).toBeDefined();
    expect(metricsRegistry.getSingleMetric('process_cpu_user_seconds_total')).toBeUndefined();
    expect(metricsRegistry.getSingleMetric('nodejs_eventloop_lag_seconds')).toBeUndefined();
  });

  it('the API starts its collectors when asked, once per process', async () => {
    const { metricsRegistry, startApiMetrics } = await import('./shared/http/metrics');
    startApiMetrics();
    startApiMetrics();
    expect(mockCollectDefaultMetrics).toHaveBeenCalledTimes(1);
    expect(mockCollectDefaultMetrics).toHaveBeenCalledWith({ register: metricsRegistry });
    expect(metricsRegistry.getSingleMetric('process_cpu_user_seconds_total')).toBeDefined();
  });
});
