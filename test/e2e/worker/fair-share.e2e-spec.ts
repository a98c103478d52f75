import { INestApplicationContext } from '@nestjs/common';
import Redis from 'ioredis';
import { REDIS } from '../../../src/shared/redis/redis.module';
import { EventsService } from '../../../src/shared/events/events.service';
import { MAIL_CONCURRENCY } from '../../../src/shared/mail/mail.processor';
import { MailService } from '../../../src/shared/mail/mail.service';
import { FairShare, MAX_JOB_PRIORITY } from '../../../src/shared/outbox/fair-share';
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
 * now carry FairShare priorities (a tenant's k-th job while it is busy: priority k), which
 * interleaves tenants: another tenant's first job waits for at most one job of each busy tenant.
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

  it('priorities interleave tenants: each tenant counts its own jobs, per queue; no tenant is one counter; past the range a job stays at the lowest priority', async () => {
    const fair = worker!.get(FairShare);
    const q = `q-${Date.now()}`;
    expect(await fair.priorities(q, ['a', 'a', 'b', 'a', null, null])).toEqual([1, 2, 1, 3, 1, 2]);
    expect(await fair.priorities(q, ['b', 'a'])).toEqual([2, 4]);
    expect(await fair.priorities(`${q}-other`, ['a'])).toEqual([1]);
    expect(await fair.priorities(q, [])).toEqual([]);
    // past BullMQ's range, a busy tenant's jobs stay at the lowest priority (FIFO among them)
    await worker!.get<symbol, Redis>(REDIS).set(`fair:${q}:busy`, String(MAX_JOB_PRIORITY - 1));
    expect(await fair.priorities(q, ['busy', 'busy', 'busy'])).toEqual([MAX_JOB_PRIORITY, MAX_JOB_PRIORITY, MAX_JOB_PRIORITY]);
  });

  it("another tenant's password-reset mail goes out among the next few mails, not after a busy tenant's 400 queued ones", async () => {
    const busy = await signupTenant(t);
    const quiet = await tenantWithKey(t);
    const victim = await register(t, quiet.apiKey);
    await smtp.waitFor((m) => m.to.includes(victim.email), 10_000);
    const connectionsBefore = smtp.connections;
    const BURST = 400;
    const burstTo = Array.from({ length: BURST }, () => uniqueEmail('burst'));
    await t.db.tx(async (tx) => {
      for (const to of burstTo) await worker!.get(MailService).enqueue(tx, { tenantId: busy.tenantId, to, template: 'password_reset', data: {}, secret: { token: 'reset-token' } });
    });
    // every one of the burst's mails is queued before the other tenant asks
    await eventually(async () => {
      const [{ n }] = await t.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM outbox WHERE tenant_id = $1 AND topic = 'email' AND dispatched_at IS NOT NULL`, [busy.tenantId]);
      return n === BURST;
    }, 20_000, 'the burst to be queued');
    const isBurst = (m: { to: string[] }) => burstTo.includes(m.to[0]);
    const sentBefore = smtp.messages.filter(isBurst).length;
    await post(t, '/v1/auth/password/forgot', quiet.apiKey, { email: victim.email }).expect(202);
    const reset = await smtp.waitFor((m) => m.to.includes(victim.email) && /reset/i.test(m.subject), 60_000);
    const burstAhead = smtp.messages.slice(0, smtp.messages.indexOf(reset)).filter(isBurst).length - sentBefore;
    // the burst's mails in flight and at most one more per relay poll, never the whole queue
    expect(burstAhead).toBeLessThan(25);
    expect(BURST - sentBefore - burstAhead).toBeGreaterThan(100);
    // and the whole burst still goes out, over a few reused connections (SMTP_POOL), not one per mail
    await smtp.waitForCount(isBurst, BURST, 60_000);
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
