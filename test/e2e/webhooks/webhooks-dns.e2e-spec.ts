import { INestApplicationContext } from '@nestjs/common';
import { EventsService } from '../../../src/shared/events/events.service';
import { DashboardFixture, signupTenant } from '../../factories/dashboard.factory';
import { createTestApp, TestApp } from '../../setup/app';
import { startWorkerWith } from '../../setup/worker';
import { DnsTestServer } from './dns-test-server';
import { closeIsolatedWorld, createIsolatedDatabase, eventually, Receiver, sleep } from './webhook-helpers';

interface Delivery {
  status: 'pending' | 'delivered' | 'failed';
  attempts: number;
  last_error: string | null;
  last_status_code: number | null;
  created_at: string;
  failed_at: string | null;
  delivered_at: string | null;
}

/**
 * Host names resolve through c-ares against WEBHOOK_DNS_SERVERS, here a real DNS server on
 * 127.0.0.1 that answers some names and never answers others: a tenant whose endpoint's DNS hangs
 * gets its attempts and registrations ended at their deadline, and holds up no other tenant.
 */
describe('webhooks: host names whose DNS never answers', () => {
  let db: { url: string; drop: () => Promise<void> };
  let dns: DnsTestServer;
  let t: TestApp;
  let worker: INestApplicationContext | undefined;
  let rx: Receiver;
  const savedDbUrl = process.env.DATABASE_URL;
  const base = (slug: string) => `/v1/auth/dashboard/tenants/${slug}/webhooks`;
  const post = (d: DashboardFixture, body: Record<string, unknown>) => t.http().post(base(d.slug)).set('Cookie', d.cookie).set('X-CSRF-Token', d.csrf).send(body);

  async function deliveries(d: DashboardFixture, endpointId: string): Promise<Delivery[]> {
    return (await t.http().get(`${base(d.slug)}/${endpointId}/deliveries`).set('Cookie', d.cookie).expect(200)).body.data;
  }

  async function emit(tenantId: string, eventType: string, payload: Record<string, unknown>): Promise<void> {
    const events = t.app.get(EventsService);
    await t.db.tx((tx) => events.outbox(tx, { tenantId, topic: 'webhook', eventType, payload }));
  }

  beforeAll(async () => {
    dns = await new DnsTestServer().start();
    db = await createIsolatedDatabase('whdns');
    process.env.DATABASE_URL = db.url;
    t = await createTestApp({ DATABASE_URL: db.url, WEBHOOK_DNS_SERVERS: dns.address });
    worker = await startWorkerWith({
      DATABASE_URL: db.url,
      WEBHOOK_DNS_SERVERS: dns.address,
      OUTBOX_POLL_MS: '50',
      WEBHOOK_LOCK_MS: '8000',
      WEBHOOK_BACKOFF_BASE_MS: '20',
      WEBHOOK_MAX_ATTEMPTS: '2',
      WEBHOOK_TIMEOUT_MS: '3000',
    });
    rx = await new Receiver().start();
  }, 60_000);

  afterAll(() => closeIsolatedWorld({ workers: [worker], others: [dns], rx, t, db, savedDbUrl }), 60_000);

  it("a delivery to a host whose DNS hangs fails at its attempt deadline with a clear last_error, while another tenant's deliveries go through promptly", async () => {
    const noisy = await signupTenant(t);
    const quiet = await signupTenant(t);
    // registered while the name still answered; its DNS hangs from then on
    const hangPath = rx.path();
    dns.set('stalls.example', { addresses: ['127.0.0.1'] });
    const hung: string[] = [];
    for (let i = 0; i < 6; i++) hung.push((await post(noisy, { url: `http://stalls.example:${rx.port}${hangPath}?n=${i}`, events: ['agent.revoked'] }).expect(201)).body.id);
    dns.set('stalls.example', 'silent');
    // the other tenant: one endpoint by a DNS name, one by localhost (the OS resolver, /etc/hosts)
    dns.set('healthy.example', { addresses: ['127.0.0.1'] });
    const [okByDns, okByHosts] = [rx.path(), rx.path()];
    await post(quiet, { url: `http://healthy.example:${rx.port}${okByDns}`, events: ['agent.revoked'] }).expect(201);
    await post(quiet, { url: `http://localhost:${rx.port}${okByHosts}`, events: ['agent.revoked'] }).expect(201);

    const queriesBefore = dns.queries.length;
    await emit(noisy.tenantId, 'agent.revoked', { agent_client_id: 'c0ffee00-0000-4000-8000-0000000000d1' });
    // the noisy tenant's attempts are stuck in DNS
    await eventually(async () => dns.queries.slice(queriesBefore).some((q) => q.name === 'stalls.example'), 10_000, 'lookups of the hung name');
    const sent = Date.now();
    await emit(quiet.tenantId, 'agent.revoked', { agent_client_id: 'c0ffee00-0000-4000-8000-0000000000d2' });
    const [a] = await rx.waitFor((r) => r.path === okByDns, 1, 10_000);
    const [b] = await rx.waitFor((r) => r.path === okByHosts, 1, 10_000);
    // within the relay's poll and a job pickup, not behind the hung lookups' 3 s deadlines
    expect(a.at - sent).toBeLessThan(2500);
    expect(b.at - sent).toBeLessThan(2500);

    // each of the 6 deliveries: 2 attempts, each ended by its 3 s deadline; at most 3 at once (WEBHOOK_CONCURRENCY_PER_TENANT)
    // watched in the database (polling the dashboard's API would meet its rate limit), then read
    // once through the API
    await eventually(
      async () => {
        const [r] = await t.db.query<{ failed: number }>(`SELECT count(*) FILTER (WHERE status = 'failed')::int AS failed FROM webhook_deliveries WHERE endpoint_id = ANY($1::uuid[])`, [hung]);
        return r.failed === hung.length;
      },
      60_000,
      'the hung deliveries to fail',
    );
    const failed = (await Promise.all(hung.map((id) => deliveries(noisy, id)))).flat();
    expect(failed).toHaveLength(hung.length);
    for (const d of failed) {
      expect(d).toMatchObject({ status: 'failed', attempts: 2, last_status_code: null, last_error: 'dns lookup timed out after 3000 ms', delivered_at: null });
    }
    expect(rx.on(hangPath)).toHaveLength(0);
  }, 120_000);

  it('a registration of a host whose DNS hangs answers 400 within the 3 s limit; a tenant runs at most 2 such lookups at once, other tenants are not held up', async () => {
    const noisy = await signupTenant(t);
    const quiet = await signupTenant(t);
    const names = ['hang-1.example', 'hang-2.example', 'hang-3.example'];
    for (const n of names) dns.set(n, 'silent');
    dns.set('fine.example', { addresses: ['127.0.0.1'] });
    const before = dns.queries.length;

    const start = Date.now();
    const slow = Promise.all(names.map((n) => post(noisy, { url: `http://${n}:9/x`, events: ['agent.revoked'] }).then((r) => ({ r, ms: Date.now() - start }))));
    await sleep(200);
    const okStart = Date.now();
    const ok = await post(quiet, { url: `http://fine.example:9/x`, events: ['agent.revoked'] }).expect(201);
    // not queued behind the noisy tenant's lookups (3 s each)
    expect(Date.now() - okStart).toBeLessThan(2000);
    expect(ok.body.url).toBe('http://fine.example:9/x');

    for (const { r, ms } of await slow) {
      expect(r.status).toBe(400);
      expect(r.body).toMatchObject({ code: 'request/invalid', errors: [{ field: 'url', message: 'url host did not resolve within 3000 ms' }] });
      expect(ms).toBeGreaterThanOrEqual(2900);
      expect(ms).toBeLessThan(4500);
    }
    // two lookups at a time: the third name was asked only once the first two had ended, if at all
    const first = (n: string) => dns.queries.slice(before).find((q) => q.name === n)?.at;
    const asked = names.map(first).filter((at): at is number => at !== undefined).sort((x, y) => x - y);
    expect(asked.length).toBeGreaterThanOrEqual(2);
    expect(asked.slice(0, 2).every((at) => at - start < 2000)).toBe(true);
    if (asked[2] !== undefined) expect(asked[2] - start).toBeGreaterThanOrEqual(2900);
    expect(await t.db.query(`SELECT 1 FROM webhook_endpoints WHERE tenant_id = $1`, [noisy.tenantId])).toHaveLength(0);
  }, 30_000);

  it('a name resolving to a private address is refused at registration with the answer NXDOMAIN gets (no oracle of private DNS names); an IP literal is told precisely', async () => {
    const d = await signupTenant(t);
    dns.set('private.example', { addresses: ['10.1.2.3'] });
    dns.set('mixed.example', { addresses: ['127.0.0.1', 'fd00::1'] });
    for (const host of ['private.example', 'mixed.example']) {
      const res = await post(d, { url: `https://${host}/x`, events: ['agent.revoked'] }).expect(400);
      expect(res.body.errors).toEqual([{ field: 'url', message: 'url host does not resolve to a public address' }]);
    }
    const nx = await post(d, { url: 'https://no-such-name.example/x', events: ['agent.revoked'] }).expect(400);
    expect(nx.body.errors).toEqual([{ field: 'url', message: 'url host does not resolve to a public address' }]);
    const literal = await post(d, { url: 'https://10.1.2.3/x', events: ['agent.revoked'] }).expect(400);
    expect(literal.body.errors).toEqual([{ field: 'url', message: expect.stringMatching(/^url must not resolve to a loopback, private/) }]);
  });

  it('a registration whose DNS lookup fails (SERVFAIL from our resolver) answers 503 server/unavailable, not a 400 on the url; nothing is stored', async () => {
    const d = await signupTenant(t);
    dns.set('servfail.example', 'servfail');
    const res = await post(d, { url: 'https://servfail.example/x', events: ['agent.revoked'] }).expect(503);
    expect(res.body).toMatchObject({ code: 'server/unavailable', status: 503, detail: "The url's host could not be checked now (DNS lookup failed); try again later" });
    expect(res.body.errors).toBeUndefined();
    expect(await t.db.query(`SELECT 1 FROM webhook_endpoints WHERE tenant_id = $1`, [d.tenantId])).toHaveLength(0);
    // once the resolver answers again, the same URL registers
    dns.set('servfail.example', { addresses: ['127.0.0.1'] });
    await post(d, { url: 'http://servfail.example:9/x', events: ['agent.revoked'] }).expect(201);
  });
});
