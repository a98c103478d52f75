import { spawn } from 'child_process';
import Redis from 'ioredis';
import { freePortBelowEphemeral } from './ports';

/** Whether a Redis answers PING on this port of 127.0.0.1 now (one try, no retries). */
export async function redisAnswers(port: number): Promise<boolean> {
  const c = new Redis(port, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  // a refused connection is the answer, not an unhandled error event
  c.on('error', () => undefined);
  try {
    return (await c.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    // not on a connection already closed: ioredis would start a 2 s timer waiting for a close that
    // never comes, which outlives a short test file (Jest then force-exits its worker)
    if (c.status !== 'end') c.disconnect();
  }
}

/**
 * A Redis of a test's own, to stop, stall and restart on the same port. The port is free now and
 * below the ephemeral range (32768 and up on Linux), so no outgoing connection of the other test
 * files running meanwhile can take it while this Redis is down.
 */
export async function ownRedis(): Promise<{ port: number; startRedis: () => ReturnType<typeof spawn>; ping: () => Promise<boolean> }> {
  const port = await freePortBelowEphemeral();
  const startRedis = () => spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
  return { port, startRedis, ping: () => redisAnswers(port) };
}
