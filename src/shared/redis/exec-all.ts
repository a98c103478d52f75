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
 * Writes `keys` with the commands `writes` adds to a pipeline (or MULTI) of the client it is given;
 * when Redis refuses them, deletes the keys instead and resolves all the same. A Redis out of
 * memory under `noeviction` refuses writes but takes deletes (they free memory): a slot that
 * cannot be overwritten with a newer state (a session ended, a cache tombstone) is emptied, so its
 * next reader goes to PostgreSQL. Rejects when Redis takes neither (unreachable, NOREPLICAS,
 * READONLY), or when fewer replicas than REDIS_REVOCATION_REPLICAS hold them in time (unless
 * `replicated: false`).
 */
export async function writeElseDelete(
  redis: Redis,
  writes: (client: Redis) => ChainableCommander,
  keys: readonly string[],
  /** false: a cache of no security weight (profiles), never held up by a missing replica */
  { replicated: waitForReplicas = true }: { replicated?: boolean } = {},
): Promise<void> {
  const demand = waitForReplicas ? replicaDemands.get(redis) : undefined;
  const client = demand ? await writerOf(demand, redis) : redis;
  try {
    await execAll(writes(client));
  } catch {
    await execAll(client.pipeline().del(...keys));
  }
  if (demand) await replicated(client, demand);
}

interface ReplicaDemand {
  replicas: number;
  timeoutMs: number;
  /** the connection these writes and their WAIT go on, opened at the first of them */
  writer?: Redis;
  /** the wait for it to be ready, while it is not */
  connecting?: Promise<void>;
}

/** REDIS_REVOCATION_REPLICAS and REDIS_REVOCATION_WAIT_MS of each client that has them (createRedis). */
const replicaDemands = new WeakMap<Redis, ReplicaDemand>();

/** What writeElseDelete waits for after writing through this client (REDIS_REVOCATION_REPLICAS; 0: nothing). */
export function demandReplicas(redis: Redis, replicas: number, timeoutMs: number): void {
  if (replicas > 0) replicaDemands.set(redis, { replicas, timeoutMs });
  else replicaDemands.delete(redis);
}

/**
 * The connection of the writes that wait for replicas: one of their own beside the client's (same
 * server, options and key prefix). WAIT counts the writes of the connection it is sent on, and
 * Redis holds every later command of that connection until it returns: on the client's own
 * connection, a revocation waiting for a missing replica would hold up every request of the
 * process (its limits, its revocation checks, /ready) for as long. Nothing is queued while it is
 * down, nor sent again after it reconnected: a WAIT that reached a new primary (after a failover)
 * would count none of the writes made on the old one and answer "acknowledged" for a write the
 * failover lost. Such a write fails instead (503, to be sent again).
 */
async function writerOf(demand: ReplicaDemand, redis: Redis): Promise<Redis> {
  if (!demand.writer) {
    const writer = redis.duplicate({ enableOfflineQueue: false, autoResendUnfulfilledCommands: false });
    // its failures reach the writes that use it (503); the client's own listener reports outages
    writer.on('error', () => undefined);
    demand.writer = writer;
  }
  const writer = demand.writer;
  if (writer.status !== 'ready') {
    // its first use, or a reconnection under way: at most a connect timeout, then the write fails.
    // One wait shared by every write meanwhile (one listener, however many revocations wait)
    demand.connecting ??= new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        writer.off('ready', done);
        demand.connecting = undefined;
        resolve();
      };
      const timer = setTimeout(done, 1000);
      writer.once('ready', done);
    });
    await demand.connecting;
  }
  return writer;
}

/** Closes the writer connection of a client that has one (with the client: quitRedis). */
export async function closeReplicaWriter(redis: Redis): Promise<void> {
  const writer = replicaDemands.get(redis)?.writer;
  if (!writer) return;
  await writer.quit().catch(() => undefined);
  writer.disconnect();
}

/**
 * Waits until the writer's writes so far (this one's included) are held by the replicas asked
 * for; rejects when fewer acknowledge them in time. Replication is asynchronous: a revocation
 * answered without it is lost by a failover to a replica that missed it, whose cached "live"
 * state then comes back until it expires.
 */
async function replicated(writer: Redis, demand: ReplicaDemand): Promise<void> {
  const acked = Number(await writer.wait(demand.replicas, demand.timeoutMs));
  if (acked < demand.replicas) throw new Error(`Redis: ${acked} of ${demand.replicas} replica(s) acknowledged the write within ${demand.timeoutMs} ms`);
}
