import type { ChainableCommander, Redis } from 'ioredis';

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

/**
 * Writes `keys` with `writes` (a pipeline over those keys); when Redis refuses them, deletes the
 * keys instead and resolves all the same. A Redis out of memory under `noeviction` refuses writes
 * but takes deletes (they free memory): a slot that cannot be overwritten with a newer state (a
 * session ended, a cache tombstone) is emptied, so its next reader goes to PostgreSQL. Rejects when
 * Redis takes neither (unreachable, NOREPLICAS, READONLY).
 */
export async function writeElseDelete(redis: Redis, writes: ChainableCommander, keys: readonly string[]): Promise<void> {
  try {
    await execAll(writes);
  } catch {
    await execAll(redis.pipeline().del(...keys));
  }
  await replicated(redis);
}

/** REDIS_REVOCATION_REPLICAS and REDIS_REVOCATION_WAIT_MS of each client that has them (createRedis). */
const replicaDemands = new WeakMap<Redis, { replicas: number; timeoutMs: number }>();

/** What writeElseDelete waits for on this client after its write (REDIS_REVOCATION_REPLICAS; 0: nothing). */
export function demandReplicas(redis: Redis, replicas: number, timeoutMs: number): void {
  if (replicas > 0) replicaDemands.set(redis, { replicas, timeoutMs });
  else replicaDemands.delete(redis);
}

/**
 * Waits until the client's writes so far (this one's included: WAIT counts a connection's writes)
 * are held by the replicas asked for; rejects when fewer acknowledge them in time. Replication is
 * asynchronous: a revocation answered without it is lost by a failover to a replica that missed
 * it, whose cached "live" state then comes back until it expires.
 */
async function replicated(redis: Redis): Promise<void> {
  const demand = replicaDemands.get(redis);
  if (!demand) return;
  const acked = Number(await redis.wait(demand.replicas, demand.timeoutMs));
  if (acked < demand.replicas) throw new Error(`Redis: ${acked} of ${demand.replicas} replica(s) acknowledged the write within ${demand.timeoutMs} ms`);
}
