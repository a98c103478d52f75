import { Injectable } from '@nestjs/common';
import type { JobsOptions, Queue, RedisQueueBackend } from 'bullmq';
import type Redis from 'ioredis';

/** BullMQ's lowest priority (its highest priority number). */
export const MAX_JOB_PRIORITY = 2_097_151;

/**
 * Numbering starts again at this number even if the queue is not idle (a queue holding retries
 * for hours may never be): jobs then waiting in `delayed` come back behind the first ones
 * numbered after (once per million), rather than every job queueing FIFO past BullMQ's range.
 */
export const RENUMBER_AT = 1_000_000;

/** A tenant's record (its last priority) is forgotten after a day without a job. */
const RECORD_TTL_SECONDS = 24 * 3600;

/**
 * Start-time fair queuing on BullMQ priorities. V, the queue's virtual time, is the highest of:
 * its last value, the priority at the head of the queue (BullMQ's `prioritized` sorted set scores
 * a job priority * 2^32 + a counter) and, once that set is empty, the highest priority handed out
 * (M: every job numbered so far has been taken). A job of a tenant whose last priority is L gets
 * max(L, V) + 1. A job that comes back with its number (a retry after a backoff, a webhook
 * waiting for its tenant's slot) is older than anything numbered since, and sorts so. Numbering
 * starts again from 1 (a new epoch: every tenant's record is void) when the queue is idle
 * (nothing prioritized, delayed, active, waiting or paused), or past RENUMBER_AT.
 */
const PRIORITIES_SCRIPT = `
local idle = redis.call('ZCARD', KEYS[1]) == 0 and redis.call('ZCARD', KEYS[2]) == 0
  and redis.call('LLEN', KEYS[3]) == 0 and redis.call('LLEN', KEYS[4]) == 0 and redis.call('LLEN', KEYS[5]) == 0
local st = redis.call('HMGET', KEYS[6], 'e', 'v', 'm')
local epoch = tonumber(st[1]) or 0
local v = tonumber(st[2]) or 0
local m = tonumber(st[3]) or 0
if idle or m >= tonumber(ARGV[2]) then
  epoch = epoch + 1
  v = 0
  m = 0
else
  local head = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  if head[2] then v = math.max(v, math.floor(tonumber(head[2]) / 4294967296)) else v = math.max(v, m) end
end
local ttl = tonumber(ARGV[1])
local out = {}
for i = 7, #KEYS do
  local rec = redis.call('HMGET', KEYS[i], 'e', 'l')
  local last = 0
  if tonumber(rec[1]) == epoch then last = tonumber(rec[2]) end
  local p = math.max(last, v)
  out[#out + 1] = p + 1
  p = p + tonumber(ARGV[i - 4])
  m = math.max(m, p)
  redis.call('HSET', KEYS[i], 'e', epoch, 'l', p)
  redis.call('EXPIRE', KEYS[i], ttl)
end
redis.call('HSET', KEYS[6], 'e', epoch, 'v', v, 'm', m)
return out
`;

/** A job for FairShare.addBulk: BullMQ's, with its fixed id, and the tenant it is counted for. */
export interface FairJob {
  tenantId: string | null | undefined;
  name: string;
  data: unknown;
  opts: JobsOptions & { jobId: string };
}

/** The queue's own Redis connection (its keys carry no application key prefix). */
const redisOf = (queue: Queue) => (queue.backend as RedisQueueBackend).client as unknown as Promise<Redis>;

/**
 * Fair share of a queue between tenants (mail, webhook fan-out and deliveries): BullMQ
 * priorities by start-time fair queuing. A tenant with nothing queued starts level with the head
 * of the queue; one with a backlog continues after its own last job. So the queue serves every
 * busy tenant's next job in turn (round robin), a tenant's own jobs keep their order, and another
 * tenant's job (a password-reset mail, a webhook) waits for at most about one job of each busy
 * tenant, never for one tenant's burst of 1,000 code mails or its webhook backlog to a slow
 * endpoint. A job retried or postponed (a webhook waiting for its tenant's slot) comes back
 * with its priority, ahead of the jobs numbered since; a stalled one BullMQ moves to the head.
 * Mails of no tenant (dashboard accounts) count as one tenant. The records live beside the
 * queue's own keys. Numbers grow while the queue is never idle and start again past RENUMBER_AT.
 * Priorities taken for an addBulk that then fails are lost: the tenant's re-sent jobs queue that
 * many places later.
 */
@Injectable()
export class FairShare {
  /**
   * Adds the jobs the queue does not hold (a re-add of a held one, by the reconciler, a retried
   * fan-out or a relay batch sent again, is a no-op and takes no turn), each at its tenant's
   * priority: one round trip to find them, one for the priorities, one addBulk.
   */
  async addBulk(queue: Queue, jobs: readonly FairJob[]): Promise<void> {
    const missing = await this.missing(queue, jobs.map((j) => j.opts.jobId));
    const owed = jobs.filter((_, i) => missing[i]);
    if (!owed.length) return;
    const priorities = await this.priorities(queue, owed.map((j) => j.tenantId));
    await queue.addBulk(owed.map((j, i) => ({ name: j.name, data: j.data, opts: { ...j.opts, priority: priorities[i] } })));
  }

  /** One priority per job of `tenantIds` (in order) for `queue`; one Redis round trip. */
  async priorities(queue: Queue, tenantIds: readonly (string | null | undefined)[]): Promise<number[]> {
    if (!tenantIds.length) return [];
    const keyOf = (t: string | null | undefined) => queue.toKey(`fair:${t ?? 'platform'}`);
    const counts = new Map<string, number>();
    for (const t of tenantIds) counts.set(keyOf(t), (counts.get(keyOf(t)) ?? 0) + 1);
    const keys = [...counts.keys()];
    const client = await redisOf(queue);
    const firsts = (await client.eval(
      PRIORITIES_SCRIPT,
      6 + keys.length,
      ...(['prioritized', 'delayed', 'active', 'wait', 'paused', 'fair-state'] as const).map((k) => queue.toKey(k)),
      ...keys,
      RECORD_TTL_SECONDS,
      RENUMBER_AT,
      ...keys.map((k) => counts.get(k)!),
    )) as number[];
    const next = new Map(keys.map((k, i) => [k, Number(firsts[i])]));
    return tenantIds.map((t) => {
      const k = keyOf(t);
      const p = next.get(k)!;
      next.set(k, p + 1);
      return Math.min(Math.max(1, p), MAX_JOB_PRIORITY);
    });
  }

  /** Which of `jobIds` the queue no longer holds (a re-add of a held one is a no-op and must not count). */
  async missing(queue: Queue, jobIds: readonly string[]): Promise<boolean[]> {
    if (!jobIds.length) return [];
    const client = await redisOf(queue);
    const pipe = client.pipeline();
    for (const id of jobIds) pipe.exists(queue.toKey(id));
    const replies = (await pipe.exec()) ?? [];
    return jobIds.map((_, i) => {
      const [err, n] = replies[i] ?? [new Error('no reply')];
      if (err) throw err;
      return Number(n) === 0;
    });
  }
}
