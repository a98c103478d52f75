import { INestApplicationContext } from '@nestjs/common';
import { createServer } from 'http';
import { AddressInfo, Socket } from 'net';
import { CommandBus } from '@nestjs/cqrs';
import { loadConfig } from '../../../src/config/config';
import { WebhookDeliveryWorker } from '../../../src/modules/webhooks/deliver/webhook-delivery.worker';
import { WebhookTenantSlots } from '../../../src/modules/webhooks/deliver/tenant-slots';
import { FanOutWebhookEventCommand } from '../../../src/modules/webhooks/fan-out/fan-out-event.command';
import { EventsService } from '../../../src/shared/events/events.service';
import { OutboxJobData } from '../../../src/shared/outbox/outbox-job';
import { OutboxRelay } from '../../../src/shared/outbox/outbox-relay.service';
import { workerMetricsRegistry } from '../../../src/shared/http/worker-metrics';
import { DashboardFixture, signupTenant } from '../../factories/dashboard.factory';
import { createTestApp, TestApp } from '../../setup/app';
import { holdWrites } from '../../setup/hold-writes';
import { startWorkerWith } from '../../setup/worker';
import { addDashboardMember, closeIsolatedWorld, createIsolatedDatabase, eventually, insertAgentClient, Receiver, sleep, verifyStandardWebhook } from './webhook-helpers';

interface Delivery {
  id: string;
  webhook_id: string;
  event_type: string;
  status: 'pending' | 'delivered' | 'failed';
  attempts: number;
  last_status_code: number | null;
  last_error: string | null;
  next_attempt_at: string | null;
  delivered_at: string | null;
  failed_at: string | null;
}

/**
 * Fast retries for tests: 20 ms, 120 ms, 480 ms, 1.2 s between the 5 attempts; 1 s attempt
 * timeout; a 3 s job lock (and stalled check), the same for every worker of the file: BullMQ runs
 * one stalled check per interval per queue, whichever worker's interval set it.
 */
const WORKER_ENV = {
  WEBHOOK_LOCK_MS: '3000',
  OUTBOX_POLL_MS: '50',
  WEBHOOK_BACKOFF_BASE_MS: '20',
  WEBHOOK_MAX_ATTEMPTS: '5',
  WEBHOOK_DISABLE_AFTER_FAILED_DELIVERIES: '2',
  WEBHOOK_TIMEOUT_MS: '1000',
};

describe('webhook delivery: outbox -> worker -> signed POST, retries, filters, disabling, crashes', () => {
  let db: { url: string; drop: () => Promise<void> };
  let t: TestApp;
  let worker: INestApplicationContext | undefined;
  const extra: INestApplicationContext[] = [];
  let rx: Receiver;
  let owner: DashboardFixture;
  const savedDbUrl = process.env.DATABASE_URL;

  const base = (slug: string) => `/v1/auth/dashboard/tenants/${slug}/webhooks`;

  async function createEndpoint(d: DashboardFixture, body: Record<string, unknown>): Promise<{ id: string; secret: string; url: string }> {
    const res = await t.http().post(base(d.slug)).set('Cookie', d.cookie).set('X-CSRF-Token', d.csrf).send(body).expect(201);
    return res.body;
  }

  async function deliveries(d: DashboardFixture, endpointId: string, query = ''): Promise<{ data: Delivery[]; pagination: { next_cursor: string | null; has_more: boolean } }> {
    const res = await t.http().get(`${base(d.slug)}/${endpointId}/deliveries${query}`).set('Cookie', d.cookie).expect(200);
    return res.body;
  }

  /** Waits for the endpoint's only delivery to reach a final state. */
  const settled = (d: DashboardFixture, endpointId: string, timeoutMs = 20_000) =>
    eventually(
      async () => {
        const { data } = await deliveries(d, endpointId);
        return data.length && data.every((x) => x.status !== 'pending') ? data : undefined;
      },
      timeoutMs,
      `deliveries of ${endpointId} to settle`,
    );

  /** Writes a webhook event to the outbox the way other modules do; returns the outbox id. */
  async function emit(tenantId: string | null, eventType: string, payload: Record<string, unknown>): Promise<string> {
    const events = t.app.get(EventsService);
    return t.db.tx(async (tx) => {
      await events.outbox(tx, { tenantId, topic: 'webhook', eventType, payload });
      const [r] = await tx.query<{ id: string }>(`SELECT currval(pg_get_serial_sequence('outbox', 'id'))::text AS id`);
      return r.id;
    });
  }

  /**
   * An HTTP server that never answers and counts the requests it has open: received, their
   * connection not yet closed by the sender (an attempt that times out destroys its request).
   */
  async function silentReceiver() {
    const sockets = new Set<Socket>();
    let open = 0;
    let maxOpen = 0;
    let arrivals = 0;
    const server = createServer((req, res) => {
      arrivals++;
      maxOpen = Math.max(maxOpen, ++open);
      res.on('close', () => open--);
      req.resume();
    });
    server.on('connection', (s) => {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as AddressInfo).port;
    return {
      url: (n: number) => `http://127.0.0.1:${port}/silent?n=${n}`,
      get maxOpen() {
        return maxOpen;
      },
      waitForArrivals: (count: number, timeoutMs = 20_000) => eventually(async () => arrivals >= count, timeoutMs, `${count} requests at the silent receiver`),
      close: async () => {
        for (const s of sockets) s.destroy();
        await new Promise<void>((resolve) => server.close(() => resolve()));
      },
    };
  }

  const deliveryEndpoints = async (outboxId: string) =>
    (await t.db.query<{ endpoint_id: string }>(`SELECT endpoint_id FROM webhook_deliveries WHERE outbox_id = $1 ORDER BY endpoint_id`, [outboxId])).map((r) => r.endpoint_id);

  beforeAll(async () => {
    db = await createIsolatedDatabase('wh');
    process.env.DATABASE_URL = db.url;
    t = await createTestApp({ DATABASE_URL: db.url });
    worker = await startWorkerWith({ ...WORKER_ENV, DATABASE_URL: db.url });
    rx = await new Receiver().start();
    owner = await signupTenant(t);
  }, 60_000);

  afterAll(() => closeIsolatedWorld({ workers: [worker, ...extra], rx, t, db, savedDbUrl }), 60_000);

  it('delivers an outbox event as {type, timestamp, data} with a Standard Webhooks signature that verifies', async () => {
    const path = rx.path();
    const ep = await createEndpoint(owner, { url: rx.url(path), events: ['agent.revoked'] });
    const agentId = await insertAgentClient(t.db, owner.tenantId);
    const payload = { agent_client_id: agentId, agent_name: 'Support bot', revoked_at: new Date().toISOString() };
    const outboxId = await emit(owner.tenantId, 'agent.revoked', payload);

    const [r] = await rx.waitFor((x) => x.path === path);
    expect(r.headers['content-type']).toBe('application/json');
    expect(r.headers['webhook-id']).toMatch(/^msg_[0-9a-f]{32}$/);
    expect(Math.abs(Number(r.headers['webhook-timestamp']) - Date.now() / 1000)).toBeLessThan(60);
    expect(r.headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);
    expect(verifyStandardWebhook(ep.secret, r.headers, r.body)).toBe(true);
    // a wrong secret, a changed body or another id do not verify
    expect(verifyStandardWebhook(`whsec_${Buffer.alloc(32, 1).toString('base64')}`, r.headers, r.body)).toBe(false);
    expect(verifyStandardWebhook(ep.secret, r.headers, r.body.replace('Support', 'Suppart'))).toBe(false);
    expect(verifyStandardWebhook(ep.secret, { ...r.headers, 'webhook-id': 'msg_other' }, r.body)).toBe(false);

    const [row] = await t.db.query<{ created_at: Date }>(`SELECT created_at FROM outbox WHERE id = $1`, [outboxId]);
    expect(JSON.parse(r.body)).toEqual({ type: 'agent.revoked', timestamp: row.created_at.toISOString(), data: payload });

    const [d] = await settled(owner, ep.id);
    expect(d).toMatchObject({
      webhook_id: r.headers['webhook-id'],
      event_type: 'agent.revoked',
      status: 'delivered',
      attempts: 1,
      last_status_code: 200,
      last_error: null,
      next_attempt_at: null,
      failed_at: null,
      delivered_at: expect.any(String),
    });
  });

  it('after a secret rotation deliveries carry two signatures (the new and the replaced secret) until the overlap ends; with no overlap, the new one only', async () => {
    const path = rx.path();
    const ep = await createEndpoint(owner, { url: rx.url(path), events: ['agent.revoked'] });
    const rotate = (body: object) =>
      t.http().post(`${base(owner.slug)}/${ep.id}/rotate-secret`).set('Cookie', owner.cookie).set('X-CSRF-Token', owner.csrf).send(body).expect(200);
    const second: string = (await rotate({})).body.secret;
    await emit(owner.tenantId, 'agent.revoked', { agent_client_id: 'c0ffee00-0000-4000-8000-0000000000f1', n: 1 });
    const [first] = await rx.waitFor((x) => x.path === path);
    expect(String(first.headers['webhook-signature']).split(' ')).toHaveLength(2);
    expect(verifyStandardWebhook(second, first.headers, first.body)).toBe(true);
    expect(verifyStandardWebhook(ep.secret, first.headers, first.body)).toBe(true);
    // once the overlap has ended the replaced secret signs no more
    await t.db.query(`UPDATE webhook_endpoints SET previous_secret_expires_at = now() - interval '1 second' WHERE id = $1`, [ep.id]);
    await emit(owner.tenantId, 'agent.revoked', { agent_client_id: 'c0ffee00-0000-4000-8000-0000000000f1', n: 2 });
    const [, expired] = await rx.waitFor((x) => x.path === path, 2);
    expect(String(expired.headers['webhook-signature']).split(' ')).toHaveLength(1);
    expect(verifyStandardWebhook(second, expired.headers, expired.body)).toBe(true);
    expect(verifyStandardWebhook(ep.secret, expired.headers, expired.body)).toBe(false);
    // a rotation with no overlap (a leaked secret): the new secret only
    const third: string = (await rotate({ previous_secret_ttl_seconds: 0 })).body.secret;
    await emit(owner.tenantId, 'agent.revoked', { agent_client_id: 'c0ffee00-0000-4000-8000-0000000000f1', n: 3 });
    const [, , last] = await rx.waitFor((x) => x.path === path, 3);
    expect(String(last.headers['webhook-signature']).split(' ')).toHaveLength(1);
    expect(verifyStandardWebhook(third, last.headers, last.body)).toBe(true);
    expect(verifyStandardWebhook(second, last.headers, last.body)).toBe(false);
  });

  it('a receiver that fails 3 times then succeeds gets the event exactly once as delivered, same webhook-id and body on every attempt', async () => {
    const path = rx.path((n) => [500, 502, 503][n - 1] ?? 200);
    const ep = await createEndpoint(owner, { url: rx.url(path), events: ['oauth.token_exchange.issued'] });
    await emit(owner.tenantId, 'oauth.token_exchange.issued', { agent_client_id: '3d3f0d8c-0000-4000-8000-000000000001', scope: 'openid' });

    await rx.waitFor((x) => x.path === path, 4);
    const [d] = await settled(owner, ep.id);
    await sleep(800); // nothing more arrives once delivered
    const got = rx.on(path);
    expect(got).toHaveLength(4);
    expect(new Set(got.map((g) => g.headers['webhook-id'])).size).toBe(1);
    expect(new Set(got.map((g) => g.body)).size).toBe(1);
    for (const g of got) expect(verifyStandardWebhook(ep.secret, g.headers, g.body)).toBe(true);
    // exactly one attempt was acknowledged with a 2xx: the fourth
    expect(d).toMatchObject({ status: 'delivered', attempts: 4, last_status_code: 200, last_error: null, webhook_id: got[0].headers['webhook-id'] });
    // retries were spaced by the backoff (20 ms, 120 ms, 480 ms at the test's base)
    expect(got[3].at - got[0].at).toBeGreaterThanOrEqual(600);
  });

  it("counts each attempt's outcome in the worker's authp_webhook_deliveries_total: retried, then delivered", async () => {
    const count = async (outcome: string) =>
      Number((await workerMetricsRegistry.metrics()).split('\n').find((l) => l.startsWith(`authp_webhook_deliveries_total{outcome="${outcome}"} `))?.split(' ').pop() ?? 0);
    const before = { retried: await count('retried'), delivered: await count('delivered'), failed: await count('failed') };
    // a tenant of its own: no endpoint of an earlier test gets the event too
    const d = await signupTenant(t);
    const path = rx.path((n) => [500, 503][n - 1] ?? 200);
    const ep = await createEndpoint(d, { url: rx.url(path), events: ['agent.revoked'] });
    await emit(d.tenantId, 'agent.revoked', { agent_client_id: 'c0ffee00-0000-4000-8000-0000000000c1' });
    await rx.waitFor((x) => x.path === path, 3);
    await settled(d, ep.id);
    // counted once the worker has the outcome, just after the delivery row's
    await eventually(async () => (await count('delivered')) === before.delivered + 1, 5_000, 'the delivery to be counted');
    expect({ retried: await count('retried'), delivered: await count('delivered'), failed: await count('failed') }).toEqual({
      retried: before.retried + 2,
      delivered: before.delivered + 1,
      failed: before.failed,
    });
  });

  it.each([
    ['delivered', 200, 1],
    ['failed for good (its last attempt, counted against the endpoint)', 500, Number(WORKER_ENV.WEBHOOK_MAX_ATTEMPTS)],
  ] as const)('the owner deleting an endpoint while the worker records an attempt as %s gets 204: both lock the endpoint first (no deadlock, no 503)', async (_outcome, reply, attempts) => {
    const path = rx.path(() => reply);
    const ep = await createEndpoint(owner, { url: rx.url(path), events: ['agent.revoked'] });
    // the worker's outcome transaction holds the delivery row (its final update waits 0.5 s in a
    // trigger) when the DELETE arrives
    const release = await holdWrites(t.db, 'webhook_deliveries', 'UPDATE', `NEW.endpoint_id = '${ep.id}' AND NEW.status <> 'pending'`, 0.5);
    try {
      await emit(owner.tenantId, 'agent.revoked', { agent_client_id: 'c0ffee00-0000-4000-8000-0000000000aa' });
      await rx.waitFor((x) => x.path === path, attempts);
      await sleep(150);
      const del = await t.http().delete(`${base(owner.slug)}/${ep.id}`).set('Cookie', owner.cookie).set('X-CSRF-Token', owner.csrf);
      expect([del.status, del.body?.code]).toEqual([204, undefined]);
      expect(await t.db.query(`SELECT 1 FROM webhook_deliveries WHERE endpoint_id = $1`, [ep.id])).toHaveLength(0);
    } finally {
      await release();
    }
  });

  it('sends an event only to endpoints whose agent_client_id filter matches the payload (events without one go to unfiltered endpoints only)', async () => {
    const d = await signupTenant(t);
    const a = await insertAgentClient(t.db, d.tenantId);
    const b = await insertAgentClient(t.db, d.tenantId);
    const events = ['oauth.token_exchange.issued', 'user.claimed'];
    const [pa, pb, pall] = [rx.path(), rx.path(), rx.path()];
    const ea = await createEndpoint(d, { url: rx.url(pa), events, agent_client_id: a });
    const eb = await createEndpoint(d, { url: rx.url(pb), events, agent_client_id: b });
    const eall = await createEndpoint(d, { url: rx.url(pall), events });

    const issued = await emit(d.tenantId, 'oauth.token_exchange.issued', { agent_client_id: a, scope: 'openid' });
    const claimed = await emit(d.tenantId, 'user.claimed', { user_id: '0b0e7e9e-0000-4000-8000-000000000002' });
    await rx.waitFor((x) => x.path === pall, 2);
    await rx.waitFor((x) => x.path === pa, 1);
    expect(await deliveryEndpoints(issued)).toEqual([ea.id, eall.id].sort());
    expect(await deliveryEndpoints(claimed)).toEqual([eall.id]);
    await sleep(500);
    expect(rx.on(pa).map((r) => JSON.parse(r.body).data.agent_client_id)).toEqual([a]);
    expect(rx.on(pb)).toHaveLength(0);
    expect(rx.on(pall).map((r) => JSON.parse(r.body).type).sort()).toEqual(['oauth.token_exchange.issued', 'user.claimed']);
    expect((await deliveries(d, eb.id)).data).toEqual([]);
  });

  it("sends an event only to the tenant's enabled endpoints subscribed to its type (or '*'), never to another tenant's", async () => {
    const d = await signupTenant(t);
    const other = await signupTenant(t);
    const [pRevoked, pStar, pOther, pDisabled] = [rx.path(), rx.path(), rx.path(), rx.path()];
    const revoked = await createEndpoint(d, { url: rx.url(pRevoked), events: ['agent.revoked'] });
    const star = await createEndpoint(d, { url: rx.url(pStar), events: ['*'] });
    const theirs = await createEndpoint(other, { url: rx.url(pOther), events: ['*'] });
    const disabled = await createEndpoint(d, { url: rx.url(pDisabled), events: ['*'] });
    await t.db.query(`UPDATE webhook_endpoints SET disabled_at = now(), disabled_reason = 'repeated_failures' WHERE id = $1`, [disabled.id]);

    const issued = await emit(d.tenantId, 'oauth.token_exchange.issued', { agent_client_id: 'c0ffee00-0000-4000-8000-000000000003' });
    const rev = await emit(d.tenantId, 'agent.revoked', { agent_client_id: 'c0ffee00-0000-4000-8000-000000000003' });
    const custom = await emit(d.tenantId, 'some.future_event', { n: 1 });
    const platform = await emit(null, 'agent.revoked', { n: 2 });
    await rx.waitFor((x) => x.path === pStar, 3);
    await rx.waitFor((x) => x.path === pRevoked, 1);

    expect(await deliveryEndpoints(issued)).toEqual([star.id]);
    expect(await deliveryEndpoints(rev)).toEqual([revoked.id, star.id].sort());
    expect(await deliveryEndpoints(custom)).toEqual([star.id]);
    await eventually(async () => (await t.db.query(`SELECT 1 FROM outbox WHERE id = $1 AND dispatched_at IS NOT NULL`, [platform])).length > 0);
    await sleep(500);
    expect(await deliveryEndpoints(platform)).toEqual([]);
    expect(rx.on(pRevoked).map((r) => JSON.parse(r.body).type)).toEqual(['agent.revoked']);
    expect(rx.on(pOther)).toHaveLength(0);
    expect(rx.on(pDisabled)).toHaveLength(0);
    expect((await deliveries(other, theirs.id)).data).toEqual([]);
  });

  it('an endpoint gets the events of the time it was enabled: not one from its disabled period, even enabled again before the fan-out ran; one from before the disable is logged as failed (endpoint disabled) while the disable holds, and sent once it is enabled again', async () => {
    const d = await signupTenant(t);
    const [path, okPath] = [rx.path(), rx.path()];
    const ep = await createEndpoint(d, { url: rx.url(path), events: ['*'] });
    const ok = await createEndpoint(d, { url: rx.url(okPath), events: ['*'] });
    const disable = () => t.db.query(`UPDATE webhook_endpoints SET disabled_at = now(), disabled_reason = 'repeated_failures' WHERE id = $1`, [ep.id]);
    const enable = () => t.http().post(`${base(d.slug)}/${ep.id}/enable`).set('Cookie', d.cookie).set('X-CSRF-Token', d.csrf).expect(200);
    // the worker lags behind (a backlog, a restart, Redis away): events wait in the outbox
    const relay = worker!.get(OutboxRelay);

    // disabled (as the automatic disable does), an event, then an owner enables it again
    await disable();
    await relay.stop();
    let during: string;
    try {
      during = await emit(d.tenantId, 'agent.revoked', { n: 'while-disabled' });
      await enable();
    } finally {
      relay.start();
    }
    await rx.waitFor((x) => x.path === okPath, 1);
    expect(await deliveryEndpoints(during)).toEqual([ok.id]);

    // an event while it is enabled, then the automatic disable before its fan-out: its delivery is
    // logged, ended by the disable
    await relay.stop();
    let before: string;
    try {
      before = await emit(d.tenantId, 'agent.revoked', { n: 'before-disable' });
      await disable();
    } finally {
      relay.start();
    }
    await rx.waitFor((x) => x.path === okPath, 2);
    expect(await deliveryEndpoints(before)).toEqual([ep.id, ok.id].sort());
    const [ended] = await settled(d, ep.id);
    expect(ended).toMatchObject({ status: 'failed', attempts: 0, last_error: 'endpoint disabled' });

    // enabled again: the next event is sent, and only it ever was
    await enable();
    await emit(d.tenantId, 'agent.revoked', { n: 'after-enable' });
    await rx.waitFor((x) => x.path === path, 1);
    await rx.waitFor((x) => x.path === okPath, 3);
    await sleep(500);
    expect(rx.on(path).map((r) => JSON.parse(r.body).data.n)).toEqual(['after-enable']);

    // an event while it is enabled, then an automatic disable and an owner's enable, all before
    // its fan-out: it was enabled when the event happened, so it is sent (review of the first fix)
    await relay.stop();
    try {
      await emit(d.tenantId, 'agent.revoked', { n: 'across-a-disable' });
      await disable();
      await enable();
    } finally {
      relay.start();
    }
    await rx.waitFor((x) => x.path === path, 2);
    expect(rx.on(path).map((r) => JSON.parse(r.body).data.n)).toEqual(['after-enable', 'across-a-disable']);
  });

  it('after PostgreSQL went back in time, an event given an old outbox id again is still delivered (Redis holds the finished jobs of that id)', async () => {
    const d = await signupTenant(t);
    const path = rx.path();
    const ep = await createEndpoint(d, { url: rx.url(path), events: ['agent.revoked'] });
    const first = await emit(d.tenantId, 'agent.revoked', { agent_client_id: 'c0ffee00-0000-4000-8000-000000000005', n: 1 });
    await rx.waitFor((x) => x.path === path);
    await settled(d, ep.id);
    // the database as it was before that event: its rows are gone and the sequence hands its id out again
    await t.db.query(`DELETE FROM webhook_deliveries WHERE outbox_id = $1`, [first]);
    await t.db.query(`DELETE FROM outbox WHERE id = $1`, [first]);
    await t.db.query(`SELECT setval(pg_get_serial_sequence('outbox', 'id'), $1::bigint, false)`, [first]);
    const again = await emit(d.tenantId, 'agent.revoked', { agent_client_id: 'c0ffee00-0000-4000-8000-000000000005', n: 2 });
    expect(again).toBe(first);
    const got = await rx.waitFor((x) => x.path === path, 2, 15_000);
    expect(JSON.parse(got[1].body).data).toMatchObject({ n: 2 });
  });

  it('a re-run fan-out or a re-relayed outbox row never delivers twice (delivery unique per event and endpoint, same job id)', async () => {
    const d = await signupTenant(t);
    const path = rx.path();
    const ep = await createEndpoint(d, { url: rx.url(path), events: ['agent.revoked'] });
    const outboxId = await emit(d.tenantId, 'agent.revoked', { agent_client_id: 'c0ffee00-0000-4000-8000-000000000004' });
    await rx.waitFor((x) => x.path === path);
    await settled(d, ep.id);

    const [row] = await t.db.query<{ payload: Record<string, unknown>; created_at: Date }>(`SELECT payload, created_at FROM outbox WHERE id = $1`, [outboxId]);
    const data: OutboxJobData = { outboxId, tenantId: d.tenantId, eventType: 'agent.revoked', payload: row.payload, secretEnc: null, createdAt: row.created_at.toISOString() };
    const again = await Promise.all([1, 2].map(() => worker!.get(CommandBus).execute(new FanOutWebhookEventCommand(data))));
    expect(again).toEqual([{ deliveries: 0 }, { deliveries: 0 }]);
    await t.db.query(`UPDATE outbox SET dispatched_at = NULL WHERE id = $1`, [outboxId]);
    await eventually(async () => (await t.db.query(`SELECT 1 FROM outbox WHERE id = $1 AND dispatched_at IS NOT NULL`, [outboxId])).length > 0);
    await sleep(700);
    expect(rx.on(path)).toHaveLength(1);
    expect((await deliveries(d, ep.id)).data).toHaveLength(1);

    // racing fan-outs of a pending event (relay paused): one delivery row, one job, one POST
    const relay = worker!.get(OutboxRelay);
    await relay.stop();
    try {
      const racedId = await emit(d.tenantId, 'agent.revoked', { agent_client_id: 'c0ffee00-0000-4000-8000-000000000004', n: 2 });
      const [raced] = await t.db.query<{ payload: Record<string, unknown>; created_at: Date }>(`SELECT payload, created_at FROM outbox WHERE id = $1`, [racedId]);
      const job: OutboxJobData = { ...data, outboxId: racedId, payload: raced.payload, createdAt: raced.created_at.toISOString() };
      const results = await Promise.all(Array.from({ length: 5 }, () => worker!.get(CommandBus).execute(new FanOutWebhookEventCommand(job))));
      expect(results.every((r) => r.deliveries <= 1)).toBe(true);
      expect(await deliveryEndpoints(racedId)).toEqual([ep.id]);
    } finally {
      relay.start();
    }
    await rx.waitFor((x) => x.path === path, 2);
    await eventually(async () => (await deliveries(d, ep.id, '?status=delivered')).data.length === 2);
    await sleep(700);
    expect(rx.on(path)).toHaveLength(2);
  });

  it('one tenant has at most WEBHOOK_CONCURRENCY_PER_TENANT (3) deliveries in flight: its silent endpoints cannot take every worker slot from the others', async () => {
    expect(loadConfig({ NODE_ENV: 'test' }).WEBHOOK_CONCURRENCY_PER_TENANT).toBe(3);
    const noisy = await signupTenant(t);
    const quiet = await signupTenant(t);
    // the noisy tenant's endpoints never answer; their receiver counts the requests it has open
    // (received, and the sender has not given up on them yet): that count is the tenant's
    // deliveries in flight, whatever the timing of their arrivals
    const silent = await silentReceiver();
    try {
      // more silent endpoints than the worker's 10 slots
      const hung: string[] = [];
      for (let i = 0; i < 12; i++) hung.push((await createEndpoint(noisy, { url: silent.url(i), events: ['agent.revoked'] })).id);
      const okPath = rx.path();
      await createEndpoint(quiet, { url: rx.url(okPath), events: ['agent.revoked'] });
      await emit(noisy.tenantId, 'agent.revoked', { agent_client_id: 'c0ffee00-0000-4000-8000-00000000000a' });
      await silent.waitForArrivals(3);
      await emit(quiet.tenantId, 'agent.revoked', { agent_client_id: 'c0ffee00-0000-4000-8000-00000000000b' });
      await rx.waitFor((r) => r.path === okPath, 1);
      // let a few rounds of attempts go by (each holds its slot until the 1 s timeout)
      await silent.waitForArrivals(9, 30_000);
      expect(silent.maxOpen).toBeLessThanOrEqual(3);
      for (const id of hung) await t.http().delete(`${base(noisy.slug)}/${id}`).set('Cookie', noisy.cookie).set('X-CSRF-Token', noisy.csrf).expect(204);
    } finally {
      await silent.close();
    }
  }, 60_000);

  it('next_attempt_at of a pending delivery: set when it is created, moved when its job waits for a tenant slot', async () => {
    const d = await signupTenant(t);
    const path = rx.path();
    const ep = await createEndpoint(d, { url: rx.url(path), events: ['agent.revoked'] });
    // the tenant's every slot is taken: the job waits (2-4 s) without an attempt
    const slots = worker!.get(WebhookTenantSlots);
    const held = ['held-1', 'held-2', 'held-3'];
    for (const id of held) expect(await slots.acquire(d.tenantId, id)).toBe(true);
    try {
      await emit(d.tenantId, 'agent.revoked', { agent_client_id: 'c0ffee00-0000-4000-8000-0000000000e1' });
      const row = () => t.db.query<{ created_at: Date; next_attempt_at: Date | null; attempts: number }>(`SELECT created_at, next_attempt_at, attempts FROM webhook_deliveries WHERE endpoint_id = $1`, [ep.id]);
      const [created] = await eventually(async () => ((await row()).length ? row() : undefined), 10_000, 'the delivery row');
      expect(created.attempts).toBe(0);
      expect(created.next_attempt_at).not.toBeNull();
      // postponed: its next attempt 2-4 s after the wait began, shown in the log
      const [postponed] = await eventually(
        async () => {
          const r = await row();
          return r[0].next_attempt_at && r[0].next_attempt_at.getTime() - created.created_at.getTime() >= 1500 ? r : undefined;
        },
        10_000,
        'next_attempt_at to move',
      );
      expect(postponed.attempts).toBe(0);
      const [{ ahead_ms }] = await t.db.query<{ ahead_ms: number }>(`SELECT extract(epoch FROM next_attempt_at - now()) * 1000 AS ahead_ms FROM webhook_deliveries WHERE endpoint_id = $1`, [ep.id]);
      expect(Number(ahead_ms)).toBeGreaterThan(0);
      expect(Number(ahead_ms)).toBeLessThanOrEqual(4000);
      const [shown] = (await deliveries(d, ep.id)).data;
      expect(shown).toMatchObject({ status: 'pending', attempts: 0, next_attempt_at: postponed.next_attempt_at!.toISOString() });
      expect(rx.on(path)).toHaveLength(0);
    } finally {
      for (const id of held) await slots.release(d.tenantId, id);
    }
    const [done] = await settled(d, ep.id);
    expect(done).toMatchObject({ status: 'delivered', attempts: 1, next_attempt_at: null });
  }, 30_000);

  it('gives up on an attempt after the timeout (10 s by default, 1 s here) and retries it; all attempts timing out fail the delivery', async () => {
    expect(loadConfig({ NODE_ENV: 'test' }).WEBHOOK_TIMEOUT_MS).toBe(10_000);
    const path = rx.path(() => 'hang');
    const ep = await createEndpoint(owner, { url: rx.url(path), events: ['agent.revoked'] });
    await emit(owner.tenantId, 'agent.revoked', { agent_client_id: 'c0ffee00-0000-4000-8000-000000000005' });

    const [d] = await settled(owner, ep.id, 40_000);
    rx.dropHeld();
    expect(d).toMatchObject({ status: 'failed', attempts: 5, last_status_code: null, last_error: 'timeout after 1000 ms', failed_at: expect.any(String), delivered_at: null });
    const got = rx.on(path);
    expect(got).toHaveLength(5);
    expect(new Set(got.map((g) => g.headers['webhook-id'])).size).toBe(1);
    // each attempt waited out the 1 s timeout before the next (less the time a request takes to
    // arrive, and a stall of the event loop the receiver shares with the worker)
    for (let i = 1; i < got.length; i++) expect(got[i].at - got[i - 1].at).toBeGreaterThanOrEqual(700);
    // one failed delivery is below the disabling threshold (2 here)
    const one = await t.http().get(`${base(owner.slug)}/${ep.id}`).set('Cookie', owner.cookie).expect(200);
    expect(one.body.disabled_at).toBeNull();
  }, 60_000);

  it('disables an endpoint whose deliveries keep failing: audit event, an email to every owner (not members), no more deliveries until enabled', async () => {
    const d = await signupTenant(t);
    const owner2 = await addDashboardMember(t, d, 'owner');
    const member = await addDashboardMember(t, d, 'member');
    let healthy = false;
    const path = rx.path(() => (healthy ? 200 : 500));
    const okPath = rx.path();
    const ep = await createEndpoint(d, { url: `${rx.url(path)}?token=receiver-secret`, events: ['*'] });
    await createEndpoint(d, { url: rx.url(okPath), events: ['*'] });

    await emit(d.tenantId, 'agent.revoked', { agent_client_id: 'c0ffee00-0000-4000-8000-000000000006' });
    await emit(d.tenantId, 'oauth.token_exchange.issued', { agent_client_id: 'c0ffee00-0000-4000-8000-000000000006' });
    const disabled = await eventually(
      async () => {
        const res = await t.http().get(`${base(d.slug)}/${ep.id}`).set('Cookie', d.cookie).expect(200);
        return res.body.disabled_at ? res.body : undefined;
      },
      30_000,
      'the endpoint to be disabled',
    );
    expect(disabled.disabled_reason).toBe('repeated_failures');
    const log = (await deliveries(d, ep.id)).data;
    expect(log).toHaveLength(2);
    for (const x of log) expect(x).toMatchObject({ status: 'failed', attempts: 5, last_status_code: 500, last_error: 'HTTP 500' });
    expect(rx.on(path)).toHaveLength(10);

    const audit = await t.db.query<{ severity: string; actor_type: string; metadata: Record<string, unknown> }>(
      `SELECT severity, actor_type, metadata FROM audit_events WHERE type = 'webhook.disabled' AND target_id = $1`,
      [ep.id],
    );
    // audited with the path redacted (a secret may be there); the owners' mail names it whole
    const shownUrl = rx.url(path);
    expect(audit).toEqual([{ severity: 'medium', actor_type: 'system', metadata: { url: `${new URL(shownUrl).origin}/REDACTED?REDACTED`, reason: 'repeated_failures', consecutive_failed_deliveries: 2 } }]);
    const mails = await t.db.query<{ payload: { to: string; template: string; data: { url: string } } }>(
      `SELECT payload FROM outbox WHERE tenant_id = $1 AND topic = 'email' AND event_type = 'email.webhook_disabled' ORDER BY payload->>'to'`,
      [d.tenantId],
    );
    expect(mails.map((m) => m.payload.to).sort()).toEqual([d.email, owner2.email].sort());
    expect(mails.map((m) => m.payload.to)).not.toContain(member.email);
    for (const m of mails) expect(m.payload).toEqual({ to: m.payload.to, template: 'webhook_disabled', data: { url: shownUrl } });
    expect(JSON.stringify(mails)).not.toContain('receiver-secret');

    // disabled: a new event is not sent to it
    const third = await emit(d.tenantId, 'agent.revoked', { agent_client_id: 'c0ffee00-0000-4000-8000-000000000006' });
    await rx.waitFor((x) => x.path === okPath, 3);
    expect(await deliveryEndpoints(third)).not.toContain(ep.id);
    expect(rx.on(path)).toHaveLength(10);

    // enabled again by an owner: delivered
    healthy = true;
    await t.http().post(`${base(d.slug)}/${ep.id}/enable`).set('Cookie', d.cookie).set('X-CSRF-Token', d.csrf).expect(200);
    await emit(d.tenantId, 'agent.revoked', { agent_client_id: 'c0ffee00-0000-4000-8000-000000000006' });
    await rx.waitFor((x) => x.path === path, 11);
    const latest = await eventually(async () => {
      const [x] = (await deliveries(d, ep.id)).data;
      return x?.status === 'delivered' ? x : undefined;
    });
    expect(latest).toMatchObject({ attempts: 1, last_status_code: 200 });
  }, 60_000);

  it('pages through the delivery log newest first', async () => {
    const path = rx.path();
    const ep = await createEndpoint(owner, { url: rx.url(path), events: ['*'] });
    const types = ['agent.revoked', 'user.claimed', 'oauth.token_exchange.issued'];
    for (const type of types) {
      await emit(owner.tenantId, type, { i: type });
      await rx.waitFor((x) => x.path === path && JSON.parse(x.body).type === type);
    }
    await eventually(async () => (await deliveries(owner, ep.id, '?status=delivered')).data.length === 3);
    const p1 = await deliveries(owner, ep.id, '?limit=2');
    expect(p1.pagination.has_more).toBe(true);
    const p2 = await deliveries(owner, ep.id, `?limit=2&cursor=${encodeURIComponent(p1.pagination.next_cursor!)}`);
    expect(p2.pagination).toEqual({ next_cursor: null, has_more: false });
    expect([...p1.data, ...p2.data].map((x) => x.event_type)).toEqual([...types].reverse());
    expect((await deliveries(owner, ep.id, '?status=failed')).data).toEqual([]);
  });

  describe('a worker that stops mid-delivery loses nothing (at least once, same webhook-id)', () => {
    it('killed while the receiver holds the request (no ack, lock lost): another worker delivers it', async () => {
      await worker!.close();
      worker = undefined;
      // a long attempt timeout keeps the first attempt in flight; once its lock expires (3 s here),
      // the next worker's stalled check takes the job over
      const w1 = await startWorkerWith({ ...WORKER_ENV, DATABASE_URL: db.url, WEBHOOK_TIMEOUT_MS: '10000' });
      extra.push(w1);
      const path = rx.path((n) => (n === 1 ? 'hang' : 200));
      const ep = await createEndpoint(owner, { url: rx.url(path), events: ['agent.revoked'] });
      await emit(owner.tenantId, 'agent.revoked', { agent_client_id: 'c0ffee00-0000-4000-8000-000000000007' });
      const [first] = await rx.waitFor((x) => x.path === path);

      // crash: stop at once without waiting for the job or releasing its lock, then drop the process
      await w1.get(WebhookDeliveryWorker).worker!.close(true);
      await w1.close();
      rx.dropHeld();
      const pending = await deliveries(owner, ep.id);
      expect(pending.data[0]).toMatchObject({ status: 'pending', delivered_at: null });

      worker = await startWorkerWith({ ...WORKER_ENV, DATABASE_URL: db.url });
      await rx.waitFor((x) => x.path === path, 2, 30_000);
      const [d] = await settled(owner, ep.id);
      await sleep(500);
      const got = rx.on(path);
      expect(got).toHaveLength(2);
      expect(got[1].headers['webhook-id']).toBe(first.headers['webhook-id']);
      expect(got[1].body).toBe(first.body);
      expect(verifyStandardWebhook(ep.secret, got[1].headers, got[1].body)).toBe(true);
      expect(d).toMatchObject({ status: 'delivered', last_status_code: 200, webhook_id: first.headers['webhook-id'] });
    }, 60_000);

    it('shut down gracefully mid-attempt: the attempt is recorded as failed and the next worker retries it', async () => {
      const path = rx.path((n) => (n === 1 ? 'hang' : 200));
      const ep = await createEndpoint(owner, { url: rx.url(path), events: ['agent.revoked'] });
      await emit(owner.tenantId, 'agent.revoked', { agent_client_id: 'c0ffee00-0000-4000-8000-000000000008' });
      const [first] = await rx.waitFor((x) => x.path === path);

      // SIGTERM path: app.close() waits for the attempt in flight (it times out after 1 s)
      await worker!.close();
      worker = undefined;
      rx.dropHeld();
      const [mid] = (await deliveries(owner, ep.id)).data;
      expect(mid).toMatchObject({ status: 'pending', attempts: 1, last_error: 'timeout after 1000 ms', next_attempt_at: expect.any(String) });

      worker = await startWorkerWith({ ...WORKER_ENV, DATABASE_URL: db.url });
      await rx.waitFor((x) => x.path === path, 2);
      const [d] = await settled(owner, ep.id);
      expect(d).toMatchObject({ status: 'delivered', attempts: 2, last_status_code: 200, last_error: null });
      expect(rx.on(path).map((r) => r.headers['webhook-id'])).toEqual([first.headers['webhook-id'], first.headers['webhook-id']]);
    }, 60_000);
  });
});
