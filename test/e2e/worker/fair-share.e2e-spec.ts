import { INestApplicationContext } from '@nestjs/common';
import { Job, Queue, Worker } from 'bullmq';
import { APP_CONFIG, AppConfig } from '../../../src/config/config';
import { RequeuePendingDeliveries } from '../../../src/modules/webhooks/deliver/requeue-pending';
import { WEBHOOK_DELIVERY_QUEUE } from '../../../src/modules/webhooks/webhook-events';
import { bullConnection, bullPrefix } from '../../../src/shared/outbox/bull-options';
import { OutboxRelay } from '../../../src/shared/outbox/outbox-relay.service';
import { EventsService } from '../../../src/shared/events/events.service';
import { MAIL_CONCURRENCY } from '../../../src/shared/mail/mail.processor';
import { MailService } from '../../../src/shared/mail/mail.service';
import { FairShare } from '../../../src/shared/outbox/fair-share';
import { signupTenant } from '../../factories/dashboard.factory';
import { createTestApp, TestApp, uniqueEmail } from '../../setup/app';
import { startSmtpCapture, SmtpCapture } from '../../setup/smtp-capture';
import { startWorkerWith } from '../../setup/worker';
import { post, register, tenantWithKey } from '../account-security/account-security.helpers';
import { closeIsolatedWorld, createIsolatedDatabase, eventually, insertAgentClient, Receiver } from '../webhooks/webhook-helpers';

/**
 * Found by a noisy-neighbour review: mail and webhooks went through one FIFO queue for every
 * tenant, so one tenant's legitimate burst (a launch, a sign-in rush: 1,000 code mails) stood
 * ahead of every other tenant's password-reset mail and webhooks for as long as it lasted. Jobs
 * now carry FairShare priorities (start-time fair queuing: a tenant with nothing queued starts
 * level with the head of the queue, one with a backlog after its own last job), which interleaves
 * tenants: another tenant's job waits for about one job of each busy tenant.
 * Asserted by order (which jobs went first), not by time.
 */
describe('fair share of the mail and webhook queues between tenants; pooled SMTP connections', () => {
  let db: { url: string; drop: () => Promise<void> };
  let t: TestApp;
  let worker: INestApplicationContext | undefined;
  let smtp: SmtpCapture;
  let rx: Receiver;
  const savedDbUrl = process.env.DATABASE_URL;

  beforeAll(async () => {
    db = await createIsolatedDatabase('fair');
    process.env.DATABASE_URL = db.url;
    smtp = await startSmtpCapture();
    rx = await new Receiver().start();
    // one delivery at a time: the order of arrival is the order the queue hands them out
    const env = { DATABASE_URL: db.url, SMTP_URL: smtp.url, OUTBOX_POLL_MS: '50', WEBHOOK_CONCURRENCY: '1', ACCOUNTS_URL: 'https://accounts.example.test' };
    t = await createTestApp(env);
    worker = await startWorkerWith(env);
  }, 60_000);

  afterAll(() => closeIsolatedWorld({ workers: [worker], others: [smtp], rx, t, db, savedDbUrl }), 120_000);

  /** Mails to fresh addresses queued for `tenantId` (as MailService does), in batches of 100; resolves once all are relayed. */
  async function queueMails(tenantId: string, count: number, tag: string): Promise<string[]> {
    const to = Array.from({ length: count }, () => uniqueEmail(tag));
    for (let i = 0; i < count; i += 100) {
      await t.db.tx(async (tx) => {
        for (const a of to.slice(i, i + 100)) await worker!.get(MailService).enqueue(tx, { tenantId, to: a, template: 'password_reset', data: {}, secret: { token: 'reset-token' } });
      });
    }
    await eventually(async () => {
      const [{ n }] = await t.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM outbox WHERE tenant_id = $1 AND topic = 'email' AND dispatched_at IS NOT NULL`, [tenantId]);
      return n >= count;
    }, 20_000, 'the mails to be queued');
    return to;
  }

  /** Asks for `victim`'s password reset; how many of `burst`'s mails went out between the request and the reset mail. */
  async function burstMailsAhead(apiKey: string, victim: string, burst: string[]): Promise<{ ahead: number; sentBefore: number }> {
    const isBurst = (m: { to: string[] }) => burst.includes(m.to[0]);
    const sentBefore = smtp.messages.filter(isBurst).length;
    await post(t, '/v1/auth/password/forgot', apiKey, { email: victim }).expect(202);
    const reset = await smtp.waitFor((m) => m.to.includes(victim) && /reset/i.test(m.subject), 90_000);
    return { ahead: smtp.messages.slice(0, smtp.messages.indexOf(reset)).filter(isBurst).length - sentBefore, sentBefore };
  }

  it("start-time fair queuing on a real queue: a tenant's own jobs keep their order, a newcomer starts level with the head of the queue, busy tenants take turns", async () => {
    const fair = worker!.get(FairShare);
    const config = worker!.get<symbol, AppConfig>(APP_CONFIG);
    const name = `fair-order-${Date.now()}`;
    const q = new Queue(name, { connection: bullConnection(config), prefix: bullPrefix(config) });
    const add = async (tenant: string | null, label: string) => {
      const [priority] = await fair.priorities(q, [tenant]);
      await q.add(label, {}, { priority });
      return priority;
    };
    try {
      expect(await add('a', 'A1')).toBe(1);
      expect(await add('a', 'A2')).toBe(2);
      expect(await add('a', 'A3')).toBe(3);
      // a newcomer starts just after the head of the queue (A1), not after A's backlog
      expect(await add('b', 'B1')).toBe(2);
      expect(await add('b', 'B2')).toBe(3);
      expect(await add(null, 'P1')).toBe(2);
      expect(await add('a', 'A4')).toBe(4);
      // a re-add of jobs the queue holds is a no-op and takes no turn (the reconciler filters them)
      const ids = (await q.getJobs(['prioritized'])).map((j) => j.id!);
      expect(await fair.missing(q, [...ids, 'no-such-job'])).toEqual([...ids.map(() => false), true]);
      const seen: string[] = [];
      const w = new Worker(name, async (job: Job) => void seen.push(job.name), { connection: bullConnection(config), prefix: bullPrefix(config), concurrency: 1 });
      try {
        await eventually(async () => seen.length === 7, 10_000, 'all seven jobs');
      } finally {
        await w.close();
      }
      // equal priorities in the order they were queued
      expect(seen).toEqual(['A1', 'A2', 'B1', 'P1', 'A3', 'B2', 'A4']);
      // the queue drained: every tenant starts again from 1
      expect(await fair.priorities(q, ['a', 'b'])).toEqual([1, 1]);
    } finally {
      await q.obliterate({ force: true }).catch(() => undefined);
      await q.close();
    }
  });

  it("a tenant that just sent 500 mails (all sent, none queued) is not put behind another tenant's burst", async () => {
    const steady = await tenantWithKey(t);
    const victim = await register(t, steady.apiKey);
    await smtp.waitFor((m) => m.to.includes(victim.email), 10_000);
    const HISTORY = 500;
    const history = await queueMails(steady.tenantId, HISTORY, 'steady');
    await smtp.waitForCount((m) => history.includes(m.to[0]), HISTORY, 90_000);
    const busy = await signupTenant(t);
    const burst = await queueMails(busy.tenantId, 400, 'burst');
    const { ahead } = await burstMailsAhead(steady.apiKey, victim.email, burst);
    expect(ahead).toBeLessThan(25);
    await smtp.waitForCount((m) => burst.includes(m.to[0]), burst.length, 60_000);
  }, 240_000);

  it('the queue reconciler re-adding jobs Redis still holds (outbox rows, webhook deliveries) does not move their tenant back in the queue', async () => {
    const x = await signupTenant(t);
    const fair = worker!.get(FairShare);
    const config = worker!.get<symbol, AppConfig>(APP_CONFIG);
    // a topic no consumer reads: its jobs stay queued (a tenant's backlog), its rows unsettled
    const topic = `fairtopic${Date.now()}`;
    const N = 50;
    await t.db.tx(async (tx) => {
      for (let i = 0; i < N; i++) await t.app.get(EventsService).outbox(tx, { tenantId: x.tenantId, topic, eventType: 'test.event', payload: { i } });
    });
    await eventually(async () => {
      const [{ n }] = await t.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM outbox WHERE topic = $1 AND dispatched_at IS NOT NULL`, [topic]);
      return n === N;
    }, 20_000, 'the backlog to be relayed');
    const q = new Queue(topic, { connection: bullConnection(config), prefix: bullPrefix(config) });
    try {
      for (let i = 0; i < 3; i++) await worker!.get(OutboxRelay).redispatchUnsettled(0);
      expect(await q.getJobCounts('prioritized')).toEqual({ prioritized: N });
      // the tenant has N jobs queued: its next one is its (N+1)-th
      expect(await fair.priorities(q, [x.tenantId])).toEqual([N + 1]);
    } finally {
      await q.obliterate({ force: true }).catch(() => undefined);
      await q.close();
    }
    // webhook deliveries to a dead endpoint, each waiting for its retry: reconcile passes add nothing
    const d = await signupTenant(t);
    const dead = rx.path(() => 500);
    await t.http().post(`/v1/auth/dashboard/tenants/${d.slug}/webhooks`).set('Cookie', d.cookie).set('X-CSRF-Token', d.csrf).send({ url: rx.url(dead), events: ['*'] }).expect(201);
    const agentId = await insertAgentClient(t.db, d.tenantId);
    const M = 20;
    await t.db.tx(async (tx) => {
      for (let i = 0; i < M; i++) await t.app.get(EventsService).outbox(tx, { tenantId: d.tenantId, topic: 'webhook', eventType: 'oauth.token_exchange.issued', payload: { agent_client_id: agentId, scope: 'openid', n: i } });
    });
    await eventually(async () => {
      const [{ n }] = await t.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM webhook_deliveries WHERE tenant_id = $1 AND status = 'pending' AND attempts >= 1`, [d.tenantId]);
      return n === M;
    }, 30_000, 'the deliveries to be pending after one attempt');
    const deliveries = new Queue(WEBHOOK_DELIVERY_QUEUE, { connection: bullConnection(config), prefix: bullPrefix(config) });
    try {
      const before = await deliveries.getJobCounts('prioritized', 'delayed', 'wait');
      for (let i = 0; i < 3; i++) await worker!.get(RequeuePendingDeliveries).run(0);
      expect(await deliveries.getJobCounts('prioritized', 'delayed', 'wait')).toEqual(before);
      const [next] = await fair.priorities(deliveries, [d.tenantId]);
      expect(next).toBeLessThanOrEqual(M + 1);
    } finally {
      await deliveries.close();
    }
  }, 120_000);

  it("another tenant's password-reset mail goes out among the next few mails, not after a busy tenant's 400 queued ones", async () => {
    const busy = await signupTenant(t);
    const quiet = await tenantWithKey(t);
    const victim = await register(t, quiet.apiKey);
    await smtp.waitFor((m) => m.to.includes(victim.email), 10_000);
    const connectionsBefore = smtp.connections;
    const BURST = 400;
    // every one of the burst's mails is queued before the other tenant asks
    const burst = await queueMails(busy.tenantId, BURST, 'burst');
    const { ahead, sentBefore } = await burstMailsAhead(quiet.apiKey, victim.email, burst);
    // the burst's mails in flight and at most one more per relay poll, never the whole queue
    expect(ahead).toBeLessThan(25);
    expect(BURST - sentBefore - ahead).toBeGreaterThan(100);
    // and the whole burst still goes out, over a few reused connections (SMTP_POOL), not one per mail
    await smtp.waitForCount((m) => burst.includes(m.to[0]), BURST, 60_000);
    expect(smtp.connections - connectionsBefore).toBeLessThanOrEqual(2 * MAIL_CONCURRENCY);
  }, 120_000);

  it("another tenant's webhook is delivered among the next few deliveries, not after a busy tenant's 150 queued ones", async () => {
    const busy = await signupTenant(t);
    const quiet = await signupTenant(t);
    const busyPath = rx.path(() => ({ status: 200, delayMs: 20 }));
    const quietPath = rx.path();
    const endpoint = (d: typeof busy, path: string) =>
      t.http().post(`/v1/auth/dashboard/tenants/${d.slug}/webhooks`).set('Cookie', d.cookie).set('X-CSRF-Token', d.csrf).send({ url: rx.url(path), events: ['*'] }).expect(201);
    await endpoint(busy, busyPath);
    await endpoint(quiet, quietPath);
    const emit = async (tenantId: string, n: number) => {
      const agentId = await insertAgentClient(t.db, tenantId);
      await t.db.tx(async (tx) => {
        for (let i = 0; i < n; i++) await t.app.get(EventsService).outbox(tx, { tenantId, topic: 'webhook', eventType: 'oauth.token_exchange.issued', payload: { agent_client_id: agentId, scope: 'openid', n: i } });
      });
    };
    const EVENTS = 150;
    await emit(busy.tenantId, EVENTS);
    await eventually(async () => {
      const [{ n }] = await t.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM webhook_deliveries WHERE tenant_id = $1`, [busy.tenantId]);
      return n === EVENTS;
    }, 30_000, 'the busy tenant\'s deliveries');
    const busyBefore = rx.on(busyPath).length;
    await emit(quiet.tenantId, 1);
    const [quietHit] = await rx.waitFor((r) => r.path === quietPath, 1, 30_000);
    const busyAhead = rx.received.slice(0, rx.received.indexOf(quietHit)).filter((r) => r.path === busyPath).length - busyBefore;
    expect(busyAhead).toBeLessThan(15);
    expect(EVENTS - busyBefore - busyAhead).toBeGreaterThan(50);
    await rx.waitFor((r) => r.path === busyPath, EVENTS, 60_000);
  }, 120_000);
});
