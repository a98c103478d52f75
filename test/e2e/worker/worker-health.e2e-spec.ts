import { INestApplicationContext } from '@nestjs/common';
import { Client } from 'pg';
import request from 'supertest';
import { OutboxRelay } from '../../../src/shared/outbox/outbox-relay.service';
import { relayStallLimitMs, WorkerHealthServer } from '../../../src/shared/http/worker-health';
import { APP_CONFIG, AppConfig } from '../../../src/config/config';
import { Db } from '../../../src/shared/db/db.service';
import { MailService } from '../../../src/shared/mail/mail.service';
import { createIsolatedDatabase, IsolatedDatabase } from '../../setup/isolated-db';
import { startWorkerWith } from '../../setup/worker';
import { eventually } from '../webhooks/webhook-helpers';

const METRICS_TOKEN = 'm'.repeat(40);

/**
 * The worker's own operations port (WORKER_HEALTH_PORT): liveness that notices a stuck outbox
 * relay, readiness of PostgreSQL and Redis, and the worker's metrics, each behind the same rules
 * as the API's (problem+json errors, METRICS_TOKEN).
 */
describe('worker: health, readiness and metrics port', () => {
  let isolated: IsolatedDatabase;
  let worker: INestApplicationContext;
  let base: string;

  beforeAll(async () => {
    isolated = await createIsolatedDatabase();
    worker = await startWorkerWith({ DATABASE_URL: isolated.url, OUTBOX_POLL_MS: '50', WORKER_HEALTH_PORT: '0', HOST: '127.0.0.1', METRICS_TOKEN });
    base = `http://127.0.0.1:${worker.get(WorkerHealthServer).port()}`;
  }, 60_000);

  afterAll(async () => {
    await worker?.close();
    await isolated?.drop();
  });

  it('GET /health and /ready answer 200 while the relay polls and the stores answer', async () => {
    const health = await request(base).get('/health').expect(200);
    expect(health.body).toEqual({ status: 'ok' });
    expect(health.headers['cache-control']).toBe('no-store');
    const ready = await request(base).get('/ready').expect(200);
    expect(ready.body).toEqual({ status: 'ok', details: { postgres: { status: 'up' }, redis: { status: 'up' } } });
    await request(base).head('/health').expect(200);
  });

  it('GET /metrics needs the METRICS_TOKEN and shows the process, the relay and the outbox backlog', async () => {
    const denied = await request(base).get('/metrics').expect(401);
    expect(denied.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(denied.body).toMatchObject({ status: 401, code: 'auth/unauthorized' });
    expect(denied.headers['www-authenticate']).toBe('Bearer realm="metrics"');
    await request(base).get('/metrics').set('Authorization', `Bearer ${'x'.repeat(40)}`).expect(401);
    const ok = await request(base).get('/metrics').set('Authorization', `Bearer ${METRICS_TOKEN}`).expect(200);
    expect(ok.headers['content-type']).toMatch(/^text\/plain/);
    expect(ok.text).toMatch(/^process_cpu_user_seconds_total \d/m);
    expect(ok.text).toMatch(/^authp_worker_outbox_relayed_rows \d+$/m);
    expect(ok.text).toMatch(/^authp_worker_outbox_last_poll_age_seconds [\d.e-]+$/m);
    expect(ok.text).toMatch(/^authp_outbox_backlog_rows\{topic="email",state="undispatched"\} 0$/m);
  });

  it('GET /metrics counts mail and webhook delivery outcomes (every series from the start, no tenant or recipient label)', async () => {
    const scrape = async () => (await request(base).get('/metrics').set('Authorization', `Bearer ${METRICS_TOKEN}`).expect(200)).text;
    const value = (text: string, series: string) => Number(text.split('\n').find((l) => l.startsWith(`${series} `))?.split(' ').pop() ?? NaN);
    const first = await scrape();
    for (const outcome of ['sent', 'retried', 'given_up', 'withdrawn', 'expired']) expect(value(first, `authp_mail_total{outcome="${outcome}"}`)).toBeGreaterThanOrEqual(0);
    for (const outcome of ['delivered', 'retried', 'failed', 'endpoint_disabled']) expect(value(first, `authp_webhook_deliveries_total{outcome="${outcome}"}`)).toBeGreaterThanOrEqual(0);
    // a mail the worker takes to its end (no SMTP_URL here: logged, which counts as sent)
    const to = `counted-${Date.now()}@example.com`;
    const db = worker.get(Db);
    await db.tx((tx) => worker.get(MailService).enqueue(tx, { tenantId: null, to, template: 'webhook_disabled', data: { url: 'https://example.com/hook' } }));
    const sent = value(first, 'authp_mail_total{outcome="sent"}');
    await eventually(async () => value(await scrape(), 'authp_mail_total{outcome="sent"}') === sent + 1, 15_000, 'the mail to be counted as sent');
    const text = await scrape();
    expect(text.split('\n').filter((l) => l.startsWith('authp_mail') || l.startsWith('authp_webhook')).join('\n')).not.toContain(to);
  });

  it('/ready answers within its 2 s bound while every connection of the pool is held (the probe has its own)', async () => {
    const small = await startWorkerWith({ DATABASE_URL: isolated.url, DATABASE_POOL_SIZE: '2', OUTBOX_POLL_MS: '50', WORKER_HEALTH_PORT: '0', HOST: '127.0.0.1' });
    const held = await Promise.all([small.get(Db).pool.connect(), small.get(Db).pool.connect()]);
    try {
      const started = Date.now();
      const res = await request(`http://127.0.0.1:${small.get(WorkerHealthServer).port()}`).get('/ready').timeout(15_000);
      expect([res.status, res.body.details?.postgres]).toEqual([200, { status: 'up' }]);
      expect(Date.now() - started).toBeLessThan(3_000);
    } finally {
      held.forEach((c) => c.release());
      await small.close();
    }
  }, 30_000);

  it('other paths and methods are problem+json 404 and 405', async () => {
    const nf = await request(base).get('/nope').expect(404);
    expect(nf.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(nf.body).toMatchObject({ status: 404, code: 'request/not_found' });
    const na = await request(base).post('/health').send({}).expect(405);
    expect(na.body).toMatchObject({ status: 405, code: 'request/method_not_allowed' });
    expect(na.headers.allow).toBe('GET, HEAD');
  });

  it('/health fails once the outbox relay is stuck in a poll past the limit, and recovers when it finishes', async () => {
    const relay = worker.get(OutboxRelay);
    const limit = relayStallLimitMs(worker.get<AppConfig>(APP_CONFIG));
    // the relay's next poll blocks on this lock (SELECT ... FOR UPDATE waits on an exclusive table lock)
    const blocker = new Client({ connectionString: isolated.url });
    await blocker.connect();
    const realNow = Date.now;
    try {
      await blocker.query('BEGIN');
      await blocker.query('LOCK TABLE outbox IN ACCESS EXCLUSIVE MODE');
      // a poll now waits on the lock: no poll finishes from here on
      await eventually(async () => relay.lastPollAgeMs() > 300, 10_000, 'the relay to be blocked');
      const stuckAt = realNow() + limit + 1_000;
      Date.now = () => stuckAt;
      const res = await request(base).get('/health').expect(503);
      expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(res.body).toMatchObject({ status: 503, code: 'server/unavailable' });
      expect(res.body.detail).toMatch(/outbox relay has not finished a poll/);
      // readiness is about the stores, which answer
      Date.now = realNow;
      await request(base).get('/ready').expect(200);
    } finally {
      Date.now = realNow;
      await blocker.query('ROLLBACK').catch(() => undefined);
      await blocker.end();
    }
    await eventually(async () => relay.lastPollAgeMs() < 1_000, 10_000, 'the relay to poll again');
    await request(base).get('/health').expect(200);
  });

  it('a worker without WORKER_HEALTH_PORT opens no port', async () => {
    const other = await startWorkerWith({ DATABASE_URL: isolated.url, OUTBOX_POLL_MS: '50' });
    try {
      expect(other.get(WorkerHealthServer).port()).toBeUndefined();
    } finally {
      await other.close();
    }
  });
});
