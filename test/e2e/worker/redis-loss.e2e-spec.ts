import { INestApplicationContext } from '@nestjs/common';
import { Job, Queue } from 'bullmq';
import Redis from 'ioredis';
import { GUEST_PURGE_SCHEDULER_ID } from '../../../src/modules/guests/purge/guest-purge.scheduler';
import { EventsService } from '../../../src/shared/events/events.service';
import { MailService } from '../../../src/shared/mail/mail.service';
import { MaintenanceScheduler } from '../../../src/shared/maintenance/maintenance.scheduler';
import { bullConnection, bullPrefix } from '../../../src/shared/outbox/bull-options';
import { outboxJobId } from '../../../src/shared/outbox/outbox-job';
import { deliveryJobId } from '../../../src/modules/webhooks/deliver/delivery-job';
import { leaseMs } from '../../../src/modules/webhooks/deliver/deliver-webhook.handler';
import { WebhookDeliveryWorker } from '../../../src/modules/webhooks/deliver/webhook-delivery.worker';
import { QueueReconciler } from '../../../src/shared/outbox/queue-reconciler';
import { DashboardFixture, signupTenant } from '../../factories/dashboard.factory';
import { createTestApp, TestApp, uniqueEmail } from '../../setup/app';
import { SmtpCapture, startSmtpCapture } from '../../setup/smtp-capture';
import { startWorkerWith } from '../../setup/worker';
import { flushTestPrefix, rawRedis } from '../agents/agents.helpers';
import { createIsolatedDatabase, eventually, Receiver, replyGate, sleep } from '../webhooks/webhook-helpers';
import { ownRedis } from '../../setup/own-redis';
import { APP_CONFIG } from '../../../src/config/config';
import { EnvelopeCipher } from '../../../src/shared/crypto/envelope-cipher';
import { SigningKeysService } from '../../../src/shared/crypto/signing-keys.service';
import { Db } from '../../../src/shared/db/db.service';
import { createRedis } from '../../../src/shared/redis/redis.module';

/**
 * Redis loses its data (a restart without persistence, a failover to a lagging replica, a flush)
 * while the worker owes work: a mail being retried, a webhook delivery waiting for its next
 * attempt, an event relayed but not yet fanned out, the job schedules. PostgreSQL still knows what
 * is owed, and the worker's queue reconciler puts it back: each mail and webhook arrives, once.
 */
describe('worker: recovery after Redis loses its data (queue reconciler)', () => {
  let db: { url: string; drop: () => Promise<void> };
  let t: TestApp;
  let worker: INestApplicationContext;
  let smtp: SmtpCapture;
  let rx: Receiver;
  let redis: Redis;
  let owner: DashboardFixture;
  const queues: Queue[] = [];
  let deliveryQueue: Queue | undefined;
  const savedDbUrl = process.env.DATABASE_URL;
  const prefix = process.env.REDIS_KEY_PREFIX as string;
  /**
   * The attempt timeout (the default). Where a second job of a delivery must meet the lease of an
   * attempt in flight, the receiver holds that attempt's answer until the test has seen the second
   * job wait: the timeout bounds how long that may take (a pass, a flush of the shared Redis, a
   * pickup), so it is not kept short here.
   */
  const TIMEOUT_MS = 10_000;

  const WORKER_ENV: Record<string, string> = {
    OUTBOX_POLL_MS: '50',
    // a failed webhook attempt waits a minute for the next: long enough to lose it in between
    WEBHOOK_BACKOFF_BASE_MS: '60000',
    WEBHOOK_MAX_ATTEMPTS: '5',
    WEBHOOK_TIMEOUT_MS: String(TIMEOUT_MS),
    // passes only when the test asks (plus the one at start)
    QUEUE_RECONCILE_SECONDS: '3600',
  };

  function queue(name: string): Queue {
    const q = new Queue(name, { connection: bullConnection({ REDIS_URL: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' }), prefix: bullPrefix({ REDIS_KEY_PREFIX: prefix }) });
    queues.push(q);
    return q;
  }

  const reconcile = () => worker.get(QueueReconciler, { strict: false }).runOnce(0);

  /**
   * A delivery's next attempt comes now instead of after its backoff: its row's next_attempt_at
   * (which the handler goes by) and its delayed job (promoted).
   */
  async function dueNow(deliveryId: string): Promise<void> {
    await t.db.query(`UPDATE webhook_deliveries SET next_attempt_at = now() WHERE id = $1`, [deliveryId]);
    deliveryQueue ??= queue('webhook-delivery');
    await (await deliveryQueue.getJob(deliveryJobId(deliveryId)))!.promote();
  }

  /** What is left of the lease of the delivery's attempt in flight (ms; null or <= 0: none). */
  const leaseLeft = async (deliveryId: string) =>
    (await t.db.query<{ left: number | null }>(`SELECT ceil(extract(epoch FROM sending_until - now()) * 1000)::int AS left FROM webhook_deliveries WHERE id = $1`, [deliveryId]))[0]
      .left;

  /**
   * A job of the delivery that found another job's attempt in flight: put back until that
   * attempt's lease runs out (not for a fixed time, not completed), while the attempt still holds
   * it. (A job put back for another reason, a tenant slot, is put back for less than the lease has
   * left: the wait goes on until the job has met the lease.)
   */
  async function waitingForTheLease(deliveryId: string): Promise<Job> {
    deliveryQueue ??= queue('webhook-delivery');
    const job = await eventually(
      async () => {
        const j = await deliveryQueue!.getJob(deliveryJobId(deliveryId));
        if (!j || (await j.getState()) !== 'delayed') return undefined;
        const left = await leaseLeft(deliveryId);
        return left !== null && left > 0 && Number(j.delay) >= left ? j : undefined;
      },
      20_000,
      'a second job of the delivery to wait for the lease of the attempt in flight',
    );
    // the attempt (its answer held by the receiver) still has its lease; the job waits no longer than it
    expect(await leaseLeft(deliveryId)).toBeGreaterThan(0);
    expect(Number(job.delay)).toBeLessThanOrEqual(leaseMs(TIMEOUT_MS) + 1_500);
    return job;
  }

  /**
   * A job waiting for a lease that has ended (the attempt recorded its outcome) runs now instead of
   * when the lease would have run out: promoted, unless its own timer already woke it.
   */
  const wake = (job: Job) => job.promote().catch(() => undefined);

  async function outboxRow(id: string): Promise<{ dispatched_at: Date | null; processed_at: Date | null }> {
    const [r] = await t.db.query<{ dispatched_at: Date | null; processed_at: Date | null }>(`SELECT dispatched_at, processed_at FROM outbox WHERE id = $1`, [id]);
    return r;
  }

  beforeAll(async () => {
    db = await createIsolatedDatabase('rloss');
    process.env.DATABASE_URL = db.url;
    smtp = await startSmtpCapture();
    rx = await new Receiver().start();
    t = await createTestApp({ DATABASE_URL: db.url });
    worker = await startWorkerWith({ ...WORKER_ENV, DATABASE_URL: db.url, SMTP_URL: smtp.url });
    redis = rawRedis();
    owner = await signupTenant(t);
  }, 60_000);

  afterAll(async () => {
    for (const q of queues) await q.close().catch(() => undefined);
    await worker?.close().catch(() => undefined);
    await t?.close();
    await rx?.close();
    await smtp?.close();
    redis?.disconnect();
    process.env.DATABASE_URL = savedDbUrl;
    await db?.drop();
  });

  it('a mail whose retry Redis lost is sent once the reconciler runs, once; a settled mail is never sent again', async () => {
    const to = uniqueEmail('lost-mail');
    smtp.failNext(1000, (r) => r === to);
    const mail = t.app.get(MailService);
    await t.db.tx((tx) => mail.enqueue(tx, { tenantId: owner.tenantId, to, template: 'password_reset', data: {}, secret: { token: 'reset-token-lost-in-redis' } }));
    const [{ id, created_at }] = await t.db.query<{ id: string; created_at: Date }>(`SELECT id::text AS id, created_at FROM outbox WHERE payload->>'to' = $1`, [to]);
    const jobId = outboxJobId(id, created_at);
    // the first attempt failed and the job waits for its retry (about a second): Redis loses it now
    const email = queue('email');
    await eventually(async () => (await email.getJobState(jobId)) === 'delayed', 15_000, 'the mail job to wait for its retry');
    await flushTestPrefix(redis);
    smtp.clearFailures();
    await sleep(1500);
    expect(smtp.messages.filter((m) => m.to.includes(to))).toHaveLength(0);
    expect((await outboxRow(id)).processed_at).toBeNull();

    const counts = await reconcile();
    expect(counts.outbox).toBeGreaterThanOrEqual(1);
    await smtp.waitFor((m) => m.to.includes(to), 15_000);
    await eventually(async () => (await outboxRow(id)).processed_at, 10_000, 'the outbox row to be settled');

    // the completed job leaves Redis (it is kept a day): the settled row is not queued again
    await eventually(async () => (await email.getJobState(jobId)) === 'completed', 10_000, 'the job to complete');
    await (await email.getJob(jobId))!.remove();
    await reconcile();
    await sleep(1000);
    expect(smtp.messages.filter((m) => m.to.includes(to))).toHaveLength(1);
  }, 60_000);

  it('a webhook delivery waiting for its retry when Redis lost it resumes where it was: same webhook-id, remaining attempts, retry schedule', async () => {
    const path = rx.path((n) => (n <= 2 ? 500 : 200));
    const endpoint = (
      await t.http().post(`/v1/auth/dashboard/tenants/${owner.slug}/webhooks`).set('Cookie', owner.cookie).set('X-CSRF-Token', owner.csrf).send({ url: rx.url(path), events: ['*'] }).expect(201)
    ).body as { id: string };
    const events = t.app.get(EventsService);
    await t.db.tx((tx) => events.outbox(tx, { tenantId: owner.tenantId, topic: 'webhook', eventType: 'agent.created', payload: { n: 1 } }));
    await rx.waitFor((r) => r.path === path, 1);
    type Row = { id: string; outbox_id: string; status: string; attempts: number; wait_s: number | null };
    const row = async (where = '') =>
      (
        await t.db.query<Row>(
          `SELECT id, outbox_id::text AS outbox_id, status, attempts, extract(epoch FROM next_attempt_at - last_attempt_at)::float AS wait_s
             FROM webhook_deliveries WHERE endpoint_id = $1 ${where}`,
          [endpoint.id],
        )
      )[0];
    const delivery = await eventually(() => row('AND attempts = 1'), 10_000, 'the first attempt to be recorded');
    // the fan-out settled its outbox row when it created the delivery
    expect((await outboxRow(delivery.outbox_id)).processed_at).not.toBeNull();
    expect(delivery.wait_s).toBeCloseTo(60, 0); // first retry step: 1 x WEBHOOK_BACKOFF_BASE_MS

    // while Redis holds the job (delayed a minute), a reconcile pass changes nothing
    const deliveries = queue('webhook-delivery');
    const jobId = deliveryJobId(delivery.id);
    // (the attempt is recorded just before BullMQ moves the job to the delayed set)
    await eventually(async () => (await deliveries.getJobState(jobId)) === 'delayed', 10_000, 'the delivery job to wait for its retry');
    expect((await reconcile())['webhook-deliveries']).toBeGreaterThanOrEqual(1);
    await sleep(1000);
    expect(rx.on(path)).toHaveLength(1);
    expect(await deliveries.getJobState(jobId)).toBe('delayed');

    // Redis loses it: the next pass queues it again, still due at the time the row says, with the
    // attempts the row has not used (5 - 1) and its attempt count
    await flushTestPrefix(redis);
    expect(await deliveries.getJobState(jobId)).toBe('unknown');
    await reconcile();
    expect(await deliveries.getJobState(jobId)).toBe('delayed');
    const resumed = (await deliveries.getJob(jobId))!;
    expect(resumed.opts.attempts).toBe(4);
    expect(resumed.data).toEqual({ deliveryId: delivery.id, tenantId: expect.any(String) });
    expect(resumed.opts.delay).toBeGreaterThan(50_000);
    await sleep(500);
    expect(rx.on(path)).toHaveLength(1);

    // its time comes (brought forward here instead of waiting a minute): attempt 2 fails, and the
    // next wait is the schedule's second step (6 x base), not the first one again
    await dueNow(delivery.id);
    await rx.waitFor((r) => r.path === path, 2, 15_000);
    const second = await eventually(() => row('AND attempts = 2'), 10_000, 'the second attempt to be recorded');
    expect(second.wait_s).toBeCloseTo(360, 0);
    await eventually(async () => (await deliveries.getJobState(jobId)) === 'delayed', 10_000, 'the job to wait for attempt 3');
    await dueNow(delivery.id);
    const received = await rx.waitFor((r) => r.path === path, 3, 15_000);
    expect(new Set(received.map((r) => r.headers['webhook-id'])).size).toBe(1);
    expect(new Set(received.map((r) => r.body)).size).toBe(1);
    const done = await eventually(() => row("AND status <> 'pending'"), 10_000, 'the delivery to settle');
    expect(done).toMatchObject({ status: 'delivered', attempts: 3 });
    await reconcile();
    await sleep(500);
    expect(rx.on(path)).toHaveLength(3);
  }, 60_000);

  it('Redis lost while a delivery is being sent: the re-added job waits for the attempt in flight (its lease) and never sends it twice', async () => {
    // the receiver holds its answer to the first attempt (a 200) until the test releases it; a
    // tenant of its own, whose one endpoint this is (no other delivery takes its tenant's slots)
    const gate = replyGate();
    const path = rx.path(() => ({ status: 200, when: gate.when }));
    const own = await signupTenant(t);
    const endpoint = (
      await t.http().post(`/v1/auth/dashboard/tenants/${own.slug}/webhooks`).set('Cookie', own.cookie).set('X-CSRF-Token', own.csrf).send({ url: rx.url(path), events: ['*'] }).expect(201)
    ).body as { id: string };
    const events = t.app.get(EventsService);
    await t.db.tx((tx) => events.outbox(tx, { tenantId: own.tenantId, topic: 'webhook', eventType: 'agent.rotated', payload: { n: 3 } }));
    const [first] = await rx.waitFor((r) => r.path === path, 1);
    const [inFlight] = await t.db.query<{ id: string; outbox_id: string; status: string; leased: boolean }>(
      `SELECT id, outbox_id::text AS outbox_id, status, sending_until > now() AS leased FROM webhook_deliveries WHERE endpoint_id = $1`,
      [endpoint.id],
    );
    expect(inFlight).toMatchObject({ status: 'pending', leased: true });

    // Redis loses the running job mid-request; the reconciler queues the delivery again at once,
    // and a free slot of the worker takes the new job while the first attempt is still waiting
    await flushTestPrefix(redis);
    await reconcile();
    const deliveries = queue('webhook-delivery');
    const jobId = deliveryJobId(inFlight.id);
    const waiting = await waitingForTheLease(inFlight.id);
    expect(rx.on(path)).toHaveLength(1);

    // the first attempt's answer comes and is recorded; the waiting job then finds the delivery done
    gate.open();
    await eventually(async () => (await t.db.query<{ status: string }>(`SELECT status FROM webhook_deliveries WHERE id = $1`, [inFlight.id]))[0].status === 'delivered', 10_000, 'the first attempt to be recorded');
    await wake(waiting);
    await eventually(async () => (await deliveries.getJobState(jobId)) === 'completed', 20_000, 'the re-added job to finish');
    expect((await deliveries.getJob(jobId))!.returnvalue).toEqual({ skipped: 'already_delivered' });
    const [done] = await t.db.query<{ status: string; attempts: number; sending_until: Date | null }>(
      `SELECT status, attempts, sending_until FROM webhook_deliveries WHERE id = $1`,
      [inFlight.id],
    );
    expect(done).toEqual({ status: 'delivered', attempts: 1, sending_until: null });
    const got = rx.on(path);
    expect(got).toHaveLength(1);
    expect(got[0].headers['webhook-id']).toBe(first.headers['webhook-id']);
  }, 60_000);

  describe('a second job of a delivery goes by the delivery row: it waits for the backoff, goes on with its attempt count, stops at WEBHOOK_MAX_ATTEMPTS (5 here)', () => {
    type Row = { id: string; status: string; attempts: number; last_error: string | null; wait_s: number | null; sending_until: Date | null };
    const rowOf = async (endpointId: string) =>
      (
        await t.db.query<Row>(
          `SELECT id, status, attempts, last_error, extract(epoch FROM next_attempt_at - last_attempt_at)::float AS wait_s, sending_until
             FROM webhook_deliveries WHERE endpoint_id = $1`,
          [endpointId],
        )
      )[0];

    /** The row once attempt `n` is recorded (its lease released). */
    const recorded = (endpointId: string, n: number) =>
      eventually(async () => {
        const r = await rowOf(endpointId);
        return r.attempts === n && !r.sending_until ? r : undefined;
      }, 10_000, `attempt ${n} to be recorded`);

    /** Attempt 2, brought forward: the row numbers it, and its retry waits the schedule's second step (6 x base), not the first. */
    async function secondAttemptTakesStepTwo(id: string, endpointId: string, path: string): Promise<void> {
      await dueNow(id);
      await rx.waitFor((r) => r.path === path, 2, 15_000);
      expect((await recorded(endpointId, 2)).wait_s).toBeCloseTo(360, 0);
    }

    /** The deliveries that gave up counted against the endpoint (its automatic-disable count). */
    const failedDeliveriesOf = async (endpointId: string) =>
      (await t.db.query<{ n: number }>(`SELECT consecutive_failed_deliveries AS n FROM webhook_endpoints WHERE id = $1`, [endpointId]))[0].n;

    async function endpointFor(path: string, tenant = owner): Promise<string> {
      const res = await t.http().post(`/v1/auth/dashboard/tenants/${tenant.slug}/webhooks`).set('Cookie', tenant.cookie).set('X-CSRF-Token', tenant.csrf).send({ url: rx.url(path), events: ['*'] });
      expect(res.status).toBe(201);
      return (res.body as { id: string }).id;
    }

    async function emitTo(n: string, tenant = owner): Promise<void> {
      const events = t.app.get(EventsService);
      await t.db.tx((tx) => events.outbox(tx, { tenantId: tenant.tenantId, topic: 'webhook', eventType: 'agent.revoked', payload: { n } }));
    }

    /**
     * Attempt 1 failed (its answer, a 500, held by the receiver until then) while a second job of
     * the delivery was waiting for its lease (`waiting`). Once the lease has ended, that job does
     * not send, but waits for the attempt the row schedules a minute later.
     */
    async function expectWaitingForTheBackoff(endpointId: string, path: string, waiting: Job): Promise<Row> {
      const row = await recorded(endpointId, 1);
      expect(row).toMatchObject({ status: 'pending', last_error: 'HTTP 500' });
      expect(row.wait_s).toBeCloseTo(60, 0);
      await wake(waiting);
      deliveryQueue ??= queue('webhook-delivery');
      const again = await eventually(
        async () => {
          const j = await deliveryQueue!.getJob(deliveryJobId(row.id));
          return j && Number(j.delay) > 30_000 && (await j.getState()) === 'delayed' && j;
        },
        20_000,
        'the second job to wait for the backoff',
      );
      // the row's next attempt (60 s after the first), not a retry step of its own
      expect(Number(again.delay)).toBeLessThanOrEqual(61_000);
      expect(rx.on(path)).toHaveLength(1);
      expect(await rowOf(endpointId)).toMatchObject({ status: 'pending', attempts: 1 });
      return row;
    }

    const deliveryOf = async (endpointId: string) =>
      (await eventually(() => rowOf(endpointId), 10_000, 'the delivery to be created')).id;

    it('re-added by the queue reconciler after Redis lost the first job mid-send', async () => {
      const gate = replyGate();
      const path = rx.path((n) => (n === 1 ? { status: 500, when: gate.when } : 500));
      // a tenant of its own: the event goes to this endpoint only (no other delivery takes its tenant's slots)
      const own = await signupTenant(t);
      const endpointId = await endpointFor(path, own);
      await emitTo('lost-mid-send', own);
      await rx.waitFor((r) => r.path === path, 1);
      const id = await deliveryOf(endpointId);
      await flushTestPrefix(redis);
      await reconcile();
      const waiting = await waitingForTheLease(id);
      gate.open();
      await expectWaitingForTheBackoff(endpointId, path, waiting);

      // attempt 2 when its time comes; the next wait is the second step (6 x base), not the first
      await secondAttemptTakesStepTwo(id, endpointId, path);

      // attempts 3 to 5: the fifth is the last (WEBHOOK_MAX_ATTEMPTS), although this job was made
      // with every attempt left when the row had used none
      for (let n = 3; n <= 5; n++) {
        await eventually(async () => (await deliveryQueue!.getJobState(deliveryJobId(id))) === 'delayed', 10_000, `the job to wait for attempt ${n}`);
        await dueNow(id);
        await rx.waitFor((r) => r.path === path, n, 15_000);
      }
      await eventually(async () => (await deliveryQueue!.getJobState(deliveryJobId(id))) === 'failed', 10_000, 'the job to fail');
      expect(await rowOf(endpointId)).toMatchObject({ status: 'failed', attempts: 5, last_error: 'HTTP 500' });
      await reconcile();
      await sleep(1000);
      expect(rx.on(path)).toHaveLength(5);
      expect(await failedDeliveriesOf(endpointId)).toBe(1);
    }, 90_000);

    it('recovered by BullMQ as stalled while its worker is still sending (the lock lost)', async () => {
      const gate = replyGate();
      const path = rx.path((n) => (n === 1 ? { status: 500, when: gate.when } : n === 2 ? 500 : 200));
      // a tenant of its own: the event goes to this endpoint only (no other delivery takes its tenant's slots)
      const own = await signupTenant(t);
      const endpointId = await endpointFor(path, own);
      await emitTo('stalled-mid-send', own);
      await rx.waitFor((r) => r.path === path, 1);
      const id = await deliveryOf(endpointId);
      // the worker's lock on the job is gone (a Redis blip, a stalled event loop): two passes of the
      // stalled check (the first marks, the second moves) give the job to a worker again
      const prefixed = `${bullPrefix({ REDIS_KEY_PREFIX: prefix })}:webhook-delivery`;
      await redis.del(`${prefixed}:${deliveryJobId(id)}:lock`);
      const check = worker.get(WebhookDeliveryWorker, { strict: false }).worker as unknown as { moveStalledJobsToWait: () => Promise<void> };
      for (let i = 0; i < 2; i++) {
        await redis.del(`${prefixed}:stalled-check`);
        await check.moveStalledJobsToWait();
      }
      const waiting = await waitingForTheLease(id);
      gate.open();
      await expectWaitingForTheBackoff(endpointId, path, waiting);

      // attempt 2 is numbered by the row (the job itself had made none): the second step follows
      await secondAttemptTakesStepTwo(id, endpointId, path);
      await eventually(async () => (await deliveryQueue!.getJobState(deliveryJobId(id))) === 'delayed', 10_000, 'the job to wait for attempt 3');
      await dueNow(id);
      await rx.waitFor((r) => r.path === path, 3, 15_000);
      await eventually(async () => (await rowOf(endpointId)).status === 'delivered', 10_000, 'the delivery to be delivered');
      expect(await rowOf(endpointId)).toMatchObject({ attempts: 3 });
      expect(new Set(rx.on(path).map((r) => r.headers['webhook-id'])).size).toBe(1);
    }, 90_000);

    it('a job of a delivery whose row has no attempt left ends it as failed without sending', async () => {
      const path = rx.path(() => 500);
      const endpointId = await endpointFor(path);
      await emitTo('no-attempt-left');
      await rx.waitFor((r) => r.path === path, 1);
      const { id } = await recorded(endpointId, 1);
      // Redis loses the job; meanwhile the row made its every attempt (as under a larger
      // WEBHOOK_MAX_ATTEMPTS before a restart lowered it), and its next one is due
      await flushTestPrefix(redis);
      await t.db.query(`UPDATE webhook_deliveries SET attempts = 5, next_attempt_at = now() WHERE id = $1`, [id]);
      await reconcile();
      deliveryQueue ??= queue('webhook-delivery');
      await eventually(async () => (await deliveryQueue!.getJobState(deliveryJobId(id))) === 'completed', 10_000, 'the job to finish');
      expect((await deliveryQueue.getJob(deliveryJobId(id)))!.returnvalue).toEqual({ skipped: 'attempts_used' });
      expect(await rowOf(endpointId)).toMatchObject({ status: 'failed', attempts: 5, last_error: 'HTTP 500' });
      expect(rx.on(path)).toHaveLength(1);
      expect(await failedDeliveriesOf(endpointId)).toBe(1);
    }, 60_000);

    it('an endpoint disabled while an attempt is in flight: the second job waits for that attempt, whose success is recorded (not failed as "endpoint disabled")', async () => {
      const path = rx.path(() => ({ status: 200, delayMs: 1500 }));
      const endpointId = await endpointFor(path);
      await emitTo('disabled-mid-send');
      await rx.waitFor((r) => r.path === path, 1);
      const [{ id }] = await t.db.query<{ id: string }>(`SELECT id FROM webhook_deliveries WHERE endpoint_id = $1`, [endpointId]);
      await t.db.query(`UPDATE webhook_endpoints SET disabled_at = now(), disabled_reason = 'repeated_failures' WHERE id = $1`, [endpointId]);
      await flushTestPrefix(redis);
      await reconcile();
      deliveryQueue ??= queue('webhook-delivery');
      // (if it met the attempt's lease, it waits for that lease to run out: timeout + 5 s)
      await eventually(async () => (await deliveryQueue!.getJobState(deliveryJobId(id))) === 'completed', leaseMs(TIMEOUT_MS) + 15_000, 'the re-added job to finish');
      expect((await deliveryQueue.getJob(deliveryJobId(id)))!.returnvalue).toEqual({ skipped: 'already_delivered' });
      expect(await rowOf(endpointId)).toMatchObject({ status: 'delivered', attempts: 1, last_error: null });
      expect(rx.on(path)).toHaveLength(1);
    }, 60_000);
  });

  it('an event relayed but never fanned out (its job lost) reaches the endpoint once the reconciler runs', async () => {
    const path = rx.path();
    await t.http().post(`/v1/auth/dashboard/tenants/${owner.slug}/webhooks`).set('Cookie', owner.cookie).set('X-CSRF-Token', owner.csrf).send({ url: rx.url(path), events: ['*'] }).expect(201);
    // the row as the relay leaves it, with its job gone from Redis before the worker took it
    const [{ id }] = await t.db.query<{ id: string }>(
      `INSERT INTO outbox (tenant_id, topic, event_type, payload, dispatched_at) VALUES ($1, 'webhook', 'agent.updated', '{"n":2}', now()) RETURNING id::text AS id`,
      [owner.tenantId],
    );
    await sleep(500);
    expect(rx.on(path)).toHaveLength(0);
    await reconcile();
    const [got] = await rx.waitFor((r) => r.path === path, 1, 15_000);
    expect(JSON.parse(got.body)).toMatchObject({ type: 'agent.updated', data: { n: 2 } });
    await eventually(async () => (await outboxRow(id)).processed_at, 10_000, 'the outbox row to be settled');
    await reconcile();
    await sleep(500);
    expect(rx.on(path)).toHaveLength(1);
  }, 60_000);


  it('a process started while Redis is away subscribes to key rotation announcements once Redis is there', async () => {
    const { port, startRedis, ping } = await ownRedis();
    const client = createRedis({ REDIS_URL: `redis://127.0.0.1:${port}`, REDIS_KEY_PREFIX: prefix });
    const keys = new SigningKeysService(t.app.get(Db), t.app.get(EnvelopeCipher), t.app.get(APP_CONFIG), client, t.app.get(EventsService));
    let server: ReturnType<typeof startRedis> | undefined;
    const probe = new Redis(port, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 0 });
    try {
      await keys.onModuleInit(); // Redis is away: the keys load from PostgreSQL, the subscription fails
      server = startRedis();
      await eventually(ping, 10_000, 'redis-server to start');
      await probe.connect();
      await eventually(async () => Number(((await probe.pubsub('NUMSUB', `${prefix}signing-keys`)) as unknown[])[1]) === 1, 10_000, 'the subscription to key rotations');
    } finally {
      keys.onModuleDestroy();
      probe.disconnect();
      client.disconnect();
      server?.kill('SIGKILL');
    }
  }, 30_000);

  it('a worker whose Redis goes away reports it once per component in its log, not a raw stack per reconnection', async () => {
    const { port, startRedis, ping } = await ownRedis();
    let server = startRedis();
    let own: INestApplicationContext | undefined;
    const printed: unknown[] = [];
    const spy = jest.spyOn(console, 'error').mockImplementation((...args: unknown[]) => void printed.push(args));
    try {
      await eventually(ping, 10_000, 'redis-server to start');
      own = await startWorkerWith({ ...WORKER_ENV, DATABASE_URL: db.url, REDIS_URL: `redis://127.0.0.1:${port}` });
      server.kill('SIGKILL');
      await sleep(4000);
      expect(printed).toEqual([]);
      // back, so the worker can close (BullMQ waits for Redis to close its queues)
      server = startRedis();
      await eventually(ping, 10_000, 'redis-server to restart');
    } finally {
      spy.mockRestore();
      await own?.close().catch(() => undefined);
      server.kill('SIGKILL');
    }
    // a worker boot, a 4 s outage, a Redis restart and the worker's close: 30 s was too tight on a
    // slow, busy host (seen once while other suites ran)
  }, 60_000);

  it('job schedules Redis lost are re-created by the next pass', async () => {
    const scheduler = worker.get(MaintenanceScheduler, { strict: false });
    expect(await scheduler.nextRun(GUEST_PURGE_SCHEDULER_ID)).toBeGreaterThan(Date.now());
    await flushTestPrefix(redis);
    expect(await scheduler.nextRun(GUEST_PURGE_SCHEDULER_ID)).toBeUndefined();
    const counts = await reconcile();
    expect(counts.schedules).toBeGreaterThanOrEqual(1);
    expect(await scheduler.nextRun(GUEST_PURGE_SCHEDULER_ID)).toBeGreaterThan(Date.now());
    // a second pass finds them and re-creates nothing
    expect((await reconcile()).schedules).toBe(0);
  }, 30_000);
});
