import { Job, Queue, Worker } from 'bullmq';
import Redis from 'ioredis';
import { FairShare, RENUMBER_AT } from '../../../src/shared/outbox/fair-share';

/**
 * Found by a review of FairShare's first fair-queuing version: a job BullMQ holds outside the
 * `prioritized` set (a retry waiting out its backoff, a webhook waiting for its tenant's slot)
 * comes back with its number; numbering started again whenever `prioritized` was empty, so such a
 * job sorted behind jobs queued after it. Numbering now starts again only when the queue is idle.
 * No app needed (FairShare has no dependencies); queues under their own prefix, removed after.
 */
const url = new URL(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
const connection = { host: url.hostname, port: Number(url.port || 6379), maxRetriesPerRequest: null };
const prefix = `fairq-${process.env.TEST_RUN_ID ?? 'x'}-${Date.now()}`;

async function until(cond: () => Promise<boolean> | boolean, ms: number, what: string): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('FairShare and jobs held outside `prioritized` (retries, postponed jobs)', () => {
  const fair = new FairShare();
  const queues: Queue[] = [];
  const open = (name: string) => {
    const q = new Queue(name, { connection, prefix });
    queues.push(q);
    return q;
  };
  afterAll(async () => {
    for (const q of queues) {
      await q.obliterate({ force: true }).catch(() => undefined);
      await q.close();
    }
  });

  it("a quiet tenant's retried job goes ahead of another tenant's burst queued while it waited out its backoff", async () => {
    const name = `retry-${Date.now()}`;
    const q = open(name);
    // a busy period: tenant X's burst of 200 is being served; the head has reached X's 200th job
    const xs = await fair.priorities(q, Array(200).fill('x'));
    const xJobs = await q.addBulk(xs.map((priority, i) => ({ name: `X-old-${i}`, data: {}, opts: { priority } })));
    for (const j of xJobs.slice(0, 199)) await j.remove();
    // a quiet tenant's job (a password-reset mail, a webhook) queued then: level with the head
    const [pa] = await fair.priorities(q, ['a']);
    expect(pa).toBe(201);
    await q.add('A-reset', {}, { priority: pa, attempts: 2, backoff: { type: 'fixed', delay: 1500 } });
    await xJobs[199].remove();
    // the worker serves it; its first attempt fails (SMTP hiccup, receiver 500): a retry with backoff
    let failed = false;
    const w1 = new Worker(name, async () => {
      failed = true;
      throw new Error('temporary failure');
    }, { connection, prefix, concurrency: 1 });
    await until(async () => failed && (await q.getJobCounts('delayed')).delayed === 1, 10_000, 'the retry to be delayed');
    await w1.close();
    // meanwhile (nothing prioritized, the retry delayed: no new numbering) tenant X starts a new burst of 300
    const burst = await fair.priorities(q, Array(300).fill('x'));
    expect(burst[0]).toBe(202);
    await q.addBulk(burst.map((priority, i) => ({ name: `X-new-${i}`, data: {}, opts: { priority } })));
    await new Promise((r) => setTimeout(r, 1800)); // the backoff has run out
    const seen: string[] = [];
    const w2 = new Worker(name, async (job: Job) => void seen.push(job.name), { connection, prefix, concurrency: 1 });
    try {
      await until(() => seen.includes('A-reset'), 30_000, 'the retry to run');
    } finally {
      await w2.close();
    }
    const ahead = seen.indexOf('A-reset');
    // fair share (README "An event"): it waits for about one job of each busy tenant, not for X's burst
    expect(ahead).toBeLessThan(5);
  }, 60_000);

  it("a tenant's new job goes after its own backlog also while that backlog waits in `delayed` (webhook slot waits)", async () => {
    const name = `order-${Date.now()}`;
    const q = open(name);
    const ps = await fair.priorities(q, Array(20).fill('a'));
    await q.addBulk(ps.map((priority, i) => ({ name: `A-${String(i).padStart(2, '0')}`, data: {}, opts: { priority } })));
    // every job finds the tenant's slots taken and waits 2-4 s in `delayed` (as WebhookDeliveryWorker.postpone does)
    const postponed = new Set<string>();
    const w1 = new Worker(name, async (job: Job, token?: string) => {
      if (!postponed.has(job.name)) {
        postponed.add(job.name);
        await job.moveToDelayed(Date.now() + 3000, token);
        const { DelayedError } = await import('bullmq');
        throw new DelayedError();
      }
    }, { connection, prefix, concurrency: 4 });
    await until(async () => postponed.size === 20 && (await q.getJobCounts('delayed')).delayed === 20, 10_000, 'the backlog to wait');
    await w1.close();
    // the tenant's next event, while its 20 older deliveries are still pending
    const [next] = await fair.priorities(q, ['a']);
    await q.add('A-new', {}, { priority: next });
    await new Promise((r) => setTimeout(r, 3200));
    const seen: string[] = [];
    const w2 = new Worker(name, async (job: Job) => void seen.push(job.name), { connection, prefix, concurrency: 1 });
    try {
      await until(() => seen.length === 21, 30_000, 'all 21 jobs');
    } finally {
      await w2.close();
    }
    // README: "a tenant's own jobs keep their order": the new one goes last
    expect({ next, position: seen.indexOf('A-new') }).toEqual({ next: 21, position: 20 });
  }, 60_000);

  it('numbering starts again past RENUMBER_AT even while jobs wait in `delayed` (a queue holding retries for hours is never idle)', async () => {
    const q = open(`renumber-${Date.now()}`);
    await q.add('retrying', {}, { priority: 5, delay: 60_000 });
    expect(await fair.priorities(q, ['a', 'a'])).toEqual([1, 2]);
    const redis = new Redis(connection);
    try {
      await redis.hset(q.toKey('fair-state'), 'm', RENUMBER_AT);
    } finally {
      redis.disconnect();
    }
    expect(await fair.priorities(q, ['a', 'b'])).toEqual([1, 1]);
  });
});
