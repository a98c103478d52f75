import { INestApplicationContext } from '@nestjs/common';
import { EventsService } from '../../../src/shared/events/events.service';
import { DashboardFixture, signupTenant } from '../../factories/dashboard.factory';
import { createTestApp, TestApp } from '../../setup/app';
import { startWorkerWith } from '../../setup/worker';
import { closeIsolatedWorld, createIsolatedDatabase, eventually, Receiver } from '../webhooks/webhook-helpers';

/**
 * Found by a mutation review: webhooks README "Automatic disable": "a delivery that used every attempt
 * counts against its endpoint; any successful delivery resets the count. At
 * WEBHOOK_DISABLE_AFTER_FAILED_DELIVERIES in a row the endpoint gets disabled_at". No other test
 * had a success between two given-up deliveries, so dropping the reset went unnoticed.
 */
const WORKER_ENV = {
  WEBHOOK_LOCK_MS: '3000',
  OUTBOX_POLL_MS: '50',
  WEBHOOK_BACKOFF_BASE_MS: '20',
  WEBHOOK_MAX_ATTEMPTS: '2',
  WEBHOOK_DISABLE_AFTER_FAILED_DELIVERIES: '2',
  WEBHOOK_TIMEOUT_MS: '1000',
};

describe('webhook failure count', () => {
  let db: { url: string; drop: () => Promise<void> };
  let t: TestApp;
  let worker: INestApplicationContext | undefined;
  let rx: Receiver;
  let d: DashboardFixture;
  const savedDbUrl = process.env.DATABASE_URL;
  const base = (slug: string) => `/v1/auth/dashboard/tenants/${slug}/webhooks`;

  beforeAll(async () => {
    db = await createIsolatedDatabase('mutwh');
    process.env.DATABASE_URL = db.url;
    t = await createTestApp({ DATABASE_URL: db.url });
    worker = await startWorkerWith({ ...WORKER_ENV, DATABASE_URL: db.url });
    rx = await new Receiver().start();
    d = await signupTenant(t);
  }, 60_000);
  afterAll(() => closeIsolatedWorld({ workers: [worker], rx, t, db, savedDbUrl }), 60_000);

  async function emit(eventType: string, payload: Record<string, unknown>): Promise<string> {
    const events = t.app.get(EventsService);
    return t.db.tx(async (tx) => {
      await events.outbox(tx, { tenantId: d.tenantId, topic: 'webhook', eventType, payload });
      const [r] = await tx.query<{ id: string }>(`SELECT currval(pg_get_serial_sequence('outbox', 'id'))::text AS id`);
      return r.id;
    });
  }
  const settled = (outboxId: string, endpointId: string) =>
    eventually(
      async () => {
        const [r] = await t.db.query<{ status: string }>(`SELECT status FROM webhook_deliveries WHERE outbox_id = $1 AND endpoint_id = $2`, [outboxId, endpointId]);
        return r && r.status !== 'pending' ? r.status : undefined;
      },
      20_000,
      `delivery of ${outboxId}`,
    );

  it('a successful delivery resets the failure count: failed, delivered, failed (threshold 2) leaves the endpoint enabled', async () => {
    // the receiver fails every request except those carrying the marker
    const path = rx.path((_n, r) => (r.body.includes('deliver-me') ? 200 : 500));
    const res = await t.http().post(base(d.slug)).set('Cookie', d.cookie).set('X-CSRF-Token', d.csrf).send({ url: rx.url(path), events: ['*'] }).expect(201);
    const ep = res.body as { id: string };

    expect(await settled(await emit('agent.revoked', { n: 1 }), ep.id)).toBe('failed');
    expect(await settled(await emit('agent.revoked', { n: 2, note: 'deliver-me' }), ep.id)).toBe('delivered');
    const [afterSuccess] = await t.db.query<{ c: number }>(`SELECT consecutive_failed_deliveries AS c FROM webhook_endpoints WHERE id = $1`, [ep.id]);
    expect(afterSuccess.c).toBe(0);
    expect(await settled(await emit('agent.revoked', { n: 3 }), ep.id)).toBe('failed');

    const got = await t.http().get(`${base(d.slug)}/${ep.id}`).set('Cookie', d.cookie).expect(200);
    expect(got.body.disabled_at ?? null).toBeNull();
    expect(await t.db.query(`SELECT 1 FROM audit_events WHERE type = 'webhook.disabled' AND target_id = $1`, [ep.id])).toHaveLength(0);
  });
  it('fan-out judges endpoints at the event\'s time: one registered after the event happened gets no delivery of it', async () => {
    const okPath = rx.path();
    const latePath = rx.path();
    const on = await t.http().post(base(d.slug)).set('Cookie', d.cookie).set('X-CSRF-Token', d.csrf).send({ url: rx.url(okPath), events: ['*'] }).expect(201);
    const late = await t.http().post(base(d.slug)).set('Cookie', d.cookie).set('X-CSRF-Token', d.csrf).send({ url: rx.url(latePath), events: ['*'] }).expect(201);
    // as if it had been registered after the event below happened (a fan-out that ran late)
    await t.db.query(`UPDATE webhook_endpoints SET created_at = now() + interval '1 hour' WHERE id = $1`, [late.body.id]);
    const outboxId = await emit('agent.revoked', { n: 'before-late-endpoint' });
    expect(await settled(outboxId, on.body.id)).toBe('delivered');
    expect(await t.db.query(`SELECT 1 FROM webhook_deliveries WHERE outbox_id = $1 AND endpoint_id = $2`, [outboxId, late.body.id])).toHaveLength(0);
    expect(rx.on(latePath)).toHaveLength(0);
  });
});
