import { EventEmitter } from 'events';
import { CLUSTER_METRICS_REPLY, CLUSTER_METRICS_REQUEST, clusterMetricsRequester, serveClusterMetrics } from './metrics';

/** API_WORKERS>1: an API process asks the primary over IPC, the primary aggregates every process's registry. */
describe('cluster metrics over IPC', () => {
  /** A primary and one API process wired back to back (cluster IPC is asynchronous). */
  function wire(aggregate: () => Promise<string>) {
    const primary = new EventEmitter();
    const child = new EventEmitter() as EventEmitter & { send(msg: unknown): boolean };
    const worker = { send: (msg: unknown) => setImmediate(() => child.emit('message', msg)) };
    child.send = (msg: unknown) => {
      setImmediate(() => primary.emit('message', worker, msg));
      return true;
    };
    serveClusterMetrics(primary as never, aggregate);
    return { primary, child };
  }

  it('answers each request with the aggregated text, matched by id', async () => {
    let n = 0;
    const { child } = wire(async () => `http_requests_total ${++n}\n`);
    const ask = clusterMetricsRequester(child);
    const [a, b] = await Promise.all([ask(), ask()]);
    expect([a, b].sort()).toEqual(['http_requests_total 1\n', 'http_requests_total 2\n']);
  });

  it('an aggregation failure rejects the request with its reason', async () => {
    const { child } = wire(() => Promise.reject(new Error('Operation timed out.')));
    await expect(clusterMetricsRequester(child)()).rejects.toThrow('cluster metrics: Operation timed out.');
  });

  it('a primary that never answers fails the request after the timeout', async () => {
    const child = Object.assign(new EventEmitter(), { send: () => true });
    await expect(clusterMetricsRequester(child, 50)()).rejects.toThrow(/did not answer within 50 ms/);
  });

  it('ignores messages that are not its own', async () => {
    const primary = new EventEmitter();
    const sent: unknown[] = [];
    serveClusterMetrics(primary as never, async () => 'x');
    primary.emit('message', { send: (m: unknown) => sent.push(m) }, { type: 'prom-client:getMetricsRes', requestId: 1 });
    primary.emit('message', { send: (m: unknown) => sent.push(m) }, null);
    await new Promise((r) => setImmediate(r));
    expect(sent).toEqual([]);
    expect(CLUSTER_METRICS_REQUEST).not.toEqual(CLUSTER_METRICS_REPLY);
  });
});
