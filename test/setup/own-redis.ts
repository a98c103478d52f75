import { spawn } from 'child_process';
import Redis from 'ioredis';
import { freePortBelowEphemeral } from './ports';

/** Whether a Redis answers PING on this port of 127.0.0.1 now (one try, no retries). */
export async function redisAnswers(port: number): Promise<boolean> {
  const c = new Redis(port, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  try {
    return (await c.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    c.disconnect();
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
