import type { ChainableCommander } from 'ioredis';

/**
 * A pipeline's or MULTI's replies, or a throw when any command failed. ioredis resolves `exec`
 * with a per-command error (a Redis that refuses writes: OOM under `noeviction`, NOREPLICAS,
 * READONLY after a failover) instead of rejecting, so an unchecked `exec` takes a write that never
 * happened for done: a read taken as "0 hits" would switch a limit off, a revocation not written
 * would leave an ended session's tokens working. Callers fail closed instead.
 */
export async function execAll(pipe: ChainableCommander): Promise<[Error | null, unknown][]> {
  const res = await pipe.exec();
  if (!res) throw new Error('Redis transaction aborted');
  const failed = res.find(([err]) => err);
  if (failed) throw failed[0];
  return res;
}
