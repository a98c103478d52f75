import { createServer, Server, Socket } from 'net';
import { INestApplicationContext } from '@nestjs/common';
import { Job, Queue, Worker } from 'bullmq';
import Redis from 'ioredis';
import { Db } from '../../../src/shared/db/db.service';
import { MailProcessor, SMTP_TIMEOUTS } from '../../../src/shared/mail/mail.processor';
import { MailService } from '../../../src/shared/mail/mail.service';
import { bullConnection, bullPrefix } from '../../../src/shared/outbox/bull-options';
import { outboxJobId } from '../../../src/shared/outbox/outbox-job';
import { QueueReconciler } from '../../../src/shared/outbox/queue-reconciler';
import { OUTBOX_MAX_STALLED_COUNT, STALLED_FAILURE } from '../../../src/shared/outbox/stalled-jobs';
import { createTenant, TenantFixture } from '../../factories/tenant.factory';
import { uniqueEmail } from '../../setup/app';
import { createIsolatedDatabase, IsolatedDatabase } from '../../setup/isolated-db';
import { SmtpCapture, startSmtpCapture } from '../../setup/smtp-capture';
import { startWorkerWith } from '../../setup/worker';
import { eventually, sleep } from '../webhooks/webhook-helpers';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const prefix = () => bullPrefix({ REDIS_KEY_PREFIX: process.env.REDIS_KEY_PREFIX as string });
/** the worker's shutdown timeout (src/worker.ts SHUTDOWN_TIMEOUT_MS) */
const SHUTDOWN_TIMEOUT_MS = 25_000;

/**
 * A mail job whose worker dies (killed mid-send, lock expired) is not given up: BullMQ retries it
 * after up to 5 stalls. One that kills its workers more often than that is given up like any
 * final failure (failed, outbox row settled), never queued again. The dying worker is a BullMQ
 * worker of the test's that takes the job and is then closed without finishing it; the stall
 * check is the real mail worker's own (its maxStalledCount).
 */
describe('worker: outbox jobs whose workers die', () => {
  let isolated: IsolatedDatabase;
  let smtp: SmtpCapture;
  let worker: INestApplicationContext;
  let db: Db;
  let tenant: TenantFixture;
  let email: Queue;
  let redis: Redis;

  beforeAll(async () => {
    isolated = await createIsolatedDatabase();
    smtp = await startSmtpCapture();
    worker = await startWorkerWith({ DATABASE_URL: isolated.url, SMTP_URL: smtp.url, OUTBOX_POLL_MS: '50', QUEUE_RECONCILE_SECONDS: '3600' });
    db = worker.get(Db);
    tenant = await createTenant(db);
    email = new Queue('email', { connection: bullConnection({ REDIS_URL }), prefix: prefix() });
    redis = new Redis(REDIS_URL);
  }, 60_000);

  afterAll(async () => {
    await email?.close();
    redis?.disconnect();
    await worker?.close();
    await smtp?.close();
    await isolated?.drop();
  });

  const mailWorker = () => worker.get(MailProcessor, { strict: false }).worker;

  /**
   * Stops the real mail worker taking jobs. A worker blocked waiting for a job still takes the
   * next one after pause(): a job that is not a mail (failed at once) is that one.
   */
  async function pauseMailWorker(): Promise<void> {
    await mailWorker().pause(true);
    const wake = await email.add('not-a-mail', { outboxId: '0', tenantId: null, eventType: 'wake', payload: {}, secretEnc: null, createdAt: new Date().toISOString() });
    await eventually(async () => (await email.getJobState(wake.id!)) === 'failed', 10_000, 'the paused worker to take its last job');
  }

  /** Queues a mail while the real mail worker is paused; returns its job id and outbox id. */
  async function queueMail(to: string): Promise<{ jobId: string; outboxId: string }> {
    await db.tx((tx) => worker.get(MailService).enqueue(tx, { tenantId: tenant.id, to, template: 'password_reset', data: {}, secret: { token: 'reset-token' } }));
    const [{ id, created_at }] = await db.query<{ id: string; created_at: Date }>(`SELECT id::text AS id, created_at FROM outbox WHERE payload->>'to' = $1`, [to]);
    const jobId = outboxJobId(id, created_at);
    // queued at its tenant's fair-share priority (FairShare)
    await eventually(async () => (await email.getJobState(jobId)) === 'prioritized', 10_000, 'the mail job to be queued');
    return { jobId, outboxId: id };
  }

  /** A worker takes the job and dies (never finishes, never renews its lock); the real worker's stall check then finds it. */
  async function dieWith(jobId: string): Promise<void> {
    const dying = new Worker('email', () => new Promise(() => undefined), { connection: bullConnection({ REDIS_URL }), prefix: prefix(), lockDuration: 300, stalledInterval: 3_600_000 });
    await eventually(async () => (await email.getJobState(jobId)) === 'active', 10_000, 'the dying worker to take the job');
    await dying.close(true);
    await sleep(400);
    // two passes of the real mail worker's stall check (the first marks, the second moves)
    const check = mailWorker() as unknown as { moveStalledJobsToWait: () => Promise<void> };
    for (let i = 0; i < 2; i++) {
      await redis.del(`${prefix()}:email:stalled-check`);
      await check.moveStalledJobsToWait();
    }
    await eventually(async () => ['waiting', 'failed'].includes(await email.getJobState(jobId)), 5_000, 'the stalled job to be moved');
  }

  const settled = async (outboxId: string) => (await db.query<{ processed_at: Date | null }>(`SELECT processed_at FROM outbox WHERE id = $1`, [outboxId]))[0].processed_at;

  it('a mail whose worker died twice is still sent (maxStalledCount 5, not 1)', async () => {
    await pauseMailWorker();
    const to = uniqueEmail('stalled-twice');
    const { jobId, outboxId } = await queueMail(to);
    await dieWith(jobId);
    await dieWith(jobId);
    // back in the queue (BullMQ moves a stalled job to the wait list, ahead of the prioritized ones)
    expect(await email.getJobState(jobId)).toBe('waiting');
    mailWorker().resume();
    await smtp.waitFor((m) => m.to.includes(to), 10_000);
    await eventually(() => settled(outboxId), 5_000, 'the outbox row to be settled');
  }, 60_000);

  it('a mail whose workers die more than that is given up once: failed, its outbox row settled, never queued again (a poison job costs 6 workers, not 6 per attempt)', async () => {
    await pauseMailWorker();
    const to = uniqueEmail('stalled-often');
    const { jobId, outboxId } = await queueMail(to);
    for (let i = 0; i <= OUTBOX_MAX_STALLED_COUNT; i++) await dieWith(jobId);
    mailWorker().resume();
    await eventually(async () => (await email.getJobState(jobId)) === 'failed', 10_000, 'the job to fail');
    const at = await eventually(() => settled(outboxId), 5_000, 'the outbox row to be settled');
    const job = (await email.getJob(jobId)) as Job;
    expect(job.failedReason).toBe(STALLED_FAILURE);
    // neither the failed handler nor the queue reconciler puts it back
    await worker.get(QueueReconciler).runOnce();
    await sleep(1000);
    expect(await email.getJobState(jobId)).toBe('failed');
    expect(smtp.messages.filter((m) => m.to.includes(to))).toHaveLength(0);
    expect(await settled(outboxId)).toEqual(at);
  }, 60_000);

  it('SMTP timeouts stay below the worker shutdown timeout', () => {
    const { connectionTimeout, greetingTimeout, socketTimeout } = SMTP_TIMEOUTS;
    expect(connectionTimeout + greetingTimeout + socketTimeout).toBeLessThan(SHUTDOWN_TIMEOUT_MS);
  });
});

describe('worker: an SMTP server that accepts and then hangs', () => {
  let isolated: IsolatedDatabase;
  let hung: Server;
  const sockets: Socket[] = [];
  let worker: INestApplicationContext | undefined;

  beforeAll(async () => {
    isolated = await createIsolatedDatabase();
    // accepts the connection, never greets
    hung = createServer((s) => sockets.push(s));
    await new Promise<void>((r) => hung.listen(0, '127.0.0.1', r));
  }, 60_000);

  afterAll(async () => {
    await worker?.close();
    for (const s of sockets) s.destroy();
    await new Promise((r) => hung.close(r));
    await isolated?.drop();
  });

  it('does not keep a mail job active past the shutdown timeout (the send attempt times out first)', async () => {
    const port = (hung.address() as { port: number }).port;
    worker = await startWorkerWith({ DATABASE_URL: isolated.url, SMTP_URL: `smtp://127.0.0.1:${port}`, OUTBOX_POLL_MS: '50', QUEUE_RECONCILE_SECONDS: '3600' });
    const db = worker.get(Db);
    const tenant = await createTenant(db);
    const to = uniqueEmail('hung-smtp');
    await db.tx((tx) => worker!.get(MailService).enqueue(tx, { tenantId: tenant.id, to, template: 'password_reset', data: {}, secret: { token: 'reset-token' } }));
    await eventually(async () => sockets.length > 0, 10_000, 'the worker to connect to the SMTP server');
    const started = Date.now();
    const w = worker;
    worker = undefined;
    await w.close();
    // nodemailer's defaults (30 s greeting, 10 min socket) would hold the job, and the shutdown, longer;
    // the 8 s on top of our greeting timeout cover closing the queues, the pool and Redis on a slow
    // host, and stay well below both that 30 s and the worker's 25 s shutdown timeout
    expect(Date.now() - started).toBeLessThan(SMTP_TIMEOUTS.greetingTimeout + 8_000);
  }, 40_000);
});
