import { EnvelopeCipher } from '../../../src/shared/crypto/envelope-cipher';
import { MAX_ENDPOINTS_PER_TENANT, WEBHOOK_EVENT_TYPES } from '../../../src/modules/webhooks/webhook-events';
import { DashboardFixture, signupTenant } from '../../factories/dashboard.factory';
import { createTestApp, TestApp } from '../../setup/app';
import { addDashboardMember, insertAgentClient } from './webhook-helpers';

describe('webhooks API: endpoints, secrets, validation, roles, tenant isolation', () => {
  let t: TestApp;
  let owner: DashboardFixture;
  let other: DashboardFixture;
  let member: { cookie: string; csrf: string };
  const base = (slug: string) => `/v1/auth/dashboard/tenants/${slug}/webhooks`;
  const HOOK_ORIGIN = 'https://93.184.216.34';
  const HOOK = `${HOOK_ORIGIN}/hooks/authp`;

  const post = (d: { slug: string; cookie: string; csrf: string }, body: unknown) =>
    t.http().post(base(d.slug)).set('Cookie', d.cookie).set('X-CSRF-Token', d.csrf).send(body as object);
  const get = (d: { slug: string; cookie: string }, path = '') => t.http().get(`${base(d.slug)}${path}`).set('Cookie', d.cookie);
  const del = (d: { slug: string; cookie: string; csrf: string }, id: string) => t.http().delete(`${base(d.slug)}/${id}`).set('Cookie', d.cookie).set('X-CSRF-Token', d.csrf);

  beforeAll(async () => {
    t = await createTestApp();
    owner = await signupTenant(t);
    other = await signupTenant(t);
    member = await addDashboardMember(t, owner, 'member');
  });

  afterAll(async () => {
    await t?.close();
  });

  it('registers an endpoint: 201 with a whsec_ secret shown once; the secret is stored encrypted and never listed', async () => {
    const res = await post(owner, { url: HOOK, events: ['agent.revoked', 'oauth.token_exchange.issued'] }).expect(201);
    expect(res.body).toEqual({
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      url: HOOK,
      events: ['agent.revoked', 'oauth.token_exchange.issued'],
      agent_client_id: null,
      created_at: expect.any(String),
      disabled_at: null,
      disabled_reason: null,
      secret: expect.stringMatching(/^whsec_[A-Za-z0-9+/]{43}=$/),
    });
    const secret: string = res.body.secret;
    expect(Buffer.from(secret.slice(6), 'base64')).toHaveLength(32);

    // stored envelope-encrypted, bound to the endpoint id
    const [row] = await t.db.query<{ secret_enc: string }>(`SELECT secret_enc FROM webhook_endpoints WHERE id = $1`, [res.body.id]);
    expect(row.secret_enc).toMatch(/^v1\./);
    expect(row.secret_enc).not.toContain(secret.slice(6));
    const cipher = t.app.get(EnvelopeCipher);
    expect(cipher.decryptString(row.secret_enc, `webhook_endpoint:${res.body.id}`)).toBe(secret);
    expect(() => cipher.decryptString(row.secret_enc, 'webhook_endpoint:00000000-0000-0000-0000-000000000000')).toThrow();

    // never listed, never readable again
    const list = await get(owner).expect(200);
    const one = await get(owner, `/${res.body.id}`).expect(200);
    for (const body of [list.body, one.body]) {
      expect(JSON.stringify(body)).not.toContain(secret.slice(6));
      expect(JSON.stringify(body)).not.toContain('secret');
    }
    const { secret: _s, ...listed } = res.body;
    expect(one.body).toEqual(listed);
    expect(list.body.data).toContainEqual(listed);

    // audited without the secret
    const audit = await t.db.query<{ metadata: Record<string, unknown>; actor_id: string }>(
      `SELECT metadata, actor_id FROM audit_events WHERE tenant_id = $1 AND type = 'webhook.created' AND target_id = $2`,
      [owner.tenantId, res.body.id],
    );
    expect(audit).toEqual([{ actor_id: owner.userId, metadata: { url: `${HOOK_ORIGIN}/REDACTED`, events: ['agent.revoked', 'oauth.token_exchange.issued'], agent_client_id: null } }]);
    expect(JSON.stringify(audit)).not.toContain(secret.slice(6));
  });

  it('accepts every catalog event type, "*" alone, loopback http URLs under NODE_ENV=test, and audits the URL with its path and query redacted', async () => {
    const all = await post(owner, { url: 'http://127.0.0.1:9/all?token=abc', events: [...WEBHOOK_EVENT_TYPES] }).expect(201);
    expect(all.body.events).toEqual([...WEBHOOK_EVENT_TYPES]);
    expect(all.body.url).toBe('http://127.0.0.1:9/all?token=abc');
    const [audit] = await t.db.query<{ metadata: { url: string } }>(`SELECT metadata FROM audit_events WHERE target_id = $1`, [all.body.id]);
    expect(audit.metadata.url).toBe('http://127.0.0.1:9/REDACTED?REDACTED');
    const star = await post(owner, { url: 'http://localhost:9/star', events: ['*'] }).expect(201);
    expect(star.body.events).toEqual(['*']);
    await post(owner, { url: 'https://[::1]:9/v6', events: ['user.claimed'] }).expect(201);
    for (const id of [all.body.id, star.body.id]) await del(owner, id).expect(204);
  });

  it('filters by one of the tenant\'s agent clients; another tenant\'s or an unknown agent is refused', async () => {
    const mine = await insertAgentClient(t.db, owner.tenantId);
    const theirs = await insertAgentClient(t.db, other.tenantId);
    const ok = await post(owner, { url: HOOK, events: ['agent.revoked'], agent_client_id: mine }).expect(201);
    expect(ok.body.agent_client_id).toBe(mine);
    for (const agent of [theirs, '00000000-0000-4000-8000-000000000000']) {
      const res = await post(owner, { url: HOOK, events: ['agent.revoked'], agent_client_id: agent }).expect(400);
      expect(res.body).toMatchObject({ code: 'request/invalid', errors: [{ field: 'agent_client_id', message: expect.any(String) }] });
    }
    await post(owner, { url: HOOK, events: ['agent.revoked'], agent_client_id: null }).expect(201);
  });

  describe('rejects bodies that break a constraint with 400 request/invalid naming the field', () => {
    const cases: [string, Record<string, unknown>, string][] = [
      ['missing url', { events: ['agent.revoked'] }, 'url'],
      ['url not a string', { url: 42, events: ['agent.revoked'] }, 'url'],
      ['url too long', { url: `https://93.184.216.34/${'a'.repeat(2048)}`, events: ['agent.revoked'] }, 'url'],
      // 1,000 characters given, 12,000 once percent-encoded as stored and answered
      ['url too long once percent-encoded', { url: `https://93.184.216.34/${'\u{1F600}'.repeat(1000)}`, events: ['agent.revoked'] }, 'url'],
      ['relative url', { url: '/hooks', events: ['agent.revoked'] }, 'url'],
      ['ftp url', { url: 'ftp://93.184.216.34/x', events: ['agent.revoked'] }, 'url'],
      ['http to a public address', { url: 'http://93.184.216.34/x', events: ['agent.revoked'] }, 'url'],
      ['private address', { url: 'https://10.1.2.3/x', events: ['agent.revoked'] }, 'url'],
      ['private address (192.168)', { url: 'https://192.168.0.10/x', events: ['agent.revoked'] }, 'url'],
      ['cloud metadata (link-local)', { url: 'https://169.254.169.254/latest', events: ['agent.revoked'] }, 'url'],
      ['IPv6 link-local', { url: 'https://[fe80::1]/x', events: ['agent.revoked'] }, 'url'],
      ['IPv4-mapped private IPv6', { url: 'https://[::ffff:10.0.0.1]/x', events: ['agent.revoked'] }, 'url'],
      ['IPv4-compatible metadata address', { url: 'https://[::a9fe:a9fe]/x', events: ['agent.revoked'] }, 'url'],
      ['IPv4-translated metadata address', { url: 'https://[::ffff:0:a9fe:a9fe]/x', events: ['agent.revoked'] }, 'url'],
      ['unspecified address', { url: 'https://0.0.0.0/x', events: ['agent.revoked'] }, 'url'],
      ['unresolvable host', { url: 'https://no-such-host.invalid/x', events: ['agent.revoked'] }, 'url'],
      ['credentials in the url', { url: 'https://user:pw@93.184.216.34/x', events: ['agent.revoked'] }, 'url'],
      ['fragment', { url: 'https://93.184.216.34/x#frag', events: ['agent.revoked'] }, 'url'],
      ['empty fragment', { url: 'http://127.0.0.1:41269/#', events: ['agent.revoked'] }, 'url'],
      ['port 0', { url: 'https://93.184.216.34:0/x', events: ['agent.revoked'] }, 'url'],
      ['missing events', { url: HOOK }, 'events'],
      ['empty events', { url: HOOK, events: [] }, 'events'],
      ['events not an array', { url: HOOK, events: 'agent.revoked' }, 'events'],
      ['unknown event type', { url: HOOK, events: ['agent.created'] }, 'events'],
      // audited only: it happens before the tenant can have an endpoint, so it could never be delivered
      ['tenant.created', { url: HOOK, events: ['tenant.created'] }, 'events'],
      ['non-string event', { url: HOOK, events: [7] }, 'events'],
      ['duplicate event', { url: HOOK, events: ['agent.revoked', 'agent.revoked'] }, 'events'],
      ['"*" with another type', { url: HOOK, events: ['*', 'agent.revoked'] }, 'events'],
      ['agent_client_id not a uuid', { url: HOOK, events: ['agent.revoked'], agent_client_id: 'agent-1' }, 'agent_client_id'],
      ['unknown property', { url: HOOK, events: ['agent.revoked'], secret: 'whsec_mine' }, 'secret'],
    ];
    it.each(cases)('%s', async (_name, body, field) => {
      const before = await t.db.query(`SELECT 1 FROM webhook_endpoints WHERE tenant_id = $1`, [owner.tenantId]);
      const res = await post(owner, body).expect(400);
      expect(res.headers['content-type']).toMatch(/application\/problem\+json/);
      expect(res.body.code).toBe('request/invalid');
      expect(res.body.errors.map((e: { field: string }) => e.field)).toContain(field);
      const after = await t.db.query(`SELECT 1 FROM webhook_endpoints WHERE tenant_id = $1`, [owner.tenantId]);
      expect(after).toHaveLength(before.length);
    });
  });

  it('members read; only owners write (403 auth/forbidden); writes need the CSRF token and a session', async () => {
    const created = await post(owner, { url: HOOK, events: ['agent.revoked'] }).expect(201);
    const m = { slug: owner.slug, ...member };
    const list = await get(m).expect(200);
    expect(list.body.data.map((e: { id: string }) => e.id)).toContain(created.body.id);
    await get(m, `/${created.body.id}`).expect(200);
    await get(m, `/${created.body.id}/deliveries`).expect(200);
    expect((await post(m, { url: HOOK, events: ['agent.revoked'] }).expect(403)).body.code).toBe('auth/forbidden');
    expect((await del(m, created.body.id).expect(403)).body.code).toBe('auth/forbidden');
    const en = await t.http().post(`${base(owner.slug)}/${created.body.id}/enable`).set('Cookie', member.cookie).set('X-CSRF-Token', member.csrf).expect(403);
    expect(en.body.code).toBe('auth/forbidden');

    expect((await t.http().post(base(owner.slug)).set('Cookie', owner.cookie).send({ url: HOOK, events: ['agent.revoked'] }).expect(403)).body.code).toBe('csrf/invalid');
    expect((await t.http().delete(`${base(owner.slug)}/${created.body.id}`).set('Cookie', owner.cookie).expect(403)).body.code).toBe('csrf/invalid');
    await t.http().get(base(owner.slug)).expect(401);
    await t.http().post(base(owner.slug)).send({ url: HOOK, events: ['agent.revoked'] }).expect(401);
    await get(owner, `/${created.body.id}`).expect(200);
  });

  it('members see an endpoint URL as its origin with the path as /REDACTED and the query as ?REDACTED (a token may be in either) and nothing past them; owners see the URL whole', async () => {
    const m = { slug: owner.slug, ...member };
    const cases: [string, string][] = [
      [`${HOOK}/q?token=s3cr3t-value&v=2`, `${HOOK_ORIGIN}/REDACTED?REDACTED`],
      [`${HOOK}/q?s3cr3t-value`, `${HOOK_ORIGIN}/REDACTED?REDACTED`],
      [`${HOOK}/q?v=1&s3cr3t-value`, `${HOOK_ORIGIN}/REDACTED?REDACTED`],
      [`${HOOK}/q?api_key%3Ds3cr3t-value`, `${HOOK_ORIGIN}/REDACTED?REDACTED`],
      // Slack and Discord incoming webhooks carry their secret in the path
      [`${HOOK_ORIGIN}/services/T0001/B0001/s3cr3t-value`, `${HOOK_ORIGIN}/REDACTED`],
      [`${HOOK_ORIGIN}/api/webhooks/123/s3cr3t-value`, `${HOOK_ORIGIN}/REDACTED`],
      [`${HOOK_ORIGIN}/?s3cr3t-value`, `${HOOK_ORIGIN}/?REDACTED`],
    ];
    for (const [secretUrl, seen] of cases) {
      const created = await post(owner, { url: secretUrl, events: ['agent.revoked'] }).expect(201);
      expect((await get(m, `/${created.body.id}`).expect(200)).body.url).toBe(seen);
      const listed = (await get(m).expect(200)).body.data as { id: string; url: string }[];
      expect(listed.find((e) => e.id === created.body.id)?.url).toBe(seen);
      expect(JSON.stringify(listed)).not.toContain('s3cr3t');
      expect((await get(owner, `/${created.body.id}`).expect(200)).body.url).toBe(secretUrl);
      expect(((await get(owner).expect(200)).body.data as { id: string; url: string }[]).find((e) => e.id === created.body.id)?.url).toBe(secretUrl);
      await del(owner, created.body.id).expect(204);
    }
    // the root path and no query: the URL as it is; one stored before fragments were refused: without its fragment
    const plain = await post(owner, { url: `${HOOK_ORIGIN}/`, events: ['agent.revoked'] }).expect(201);
    expect((await get(m, `/${plain.body.id}`).expect(200)).body.url).toBe(`${HOOK_ORIGIN}/`);
    await t.db.query(`UPDATE webhook_endpoints SET url = $2 WHERE id = $1`, [plain.body.id, `${HOOK_ORIGIN}/#access_token=s3cr3t-value`]);
    expect((await get(m, `/${plain.body.id}`).expect(200)).body.url).toBe(`${HOOK_ORIGIN}/`);
    await del(owner, plain.body.id).expect(204);
  });

  it("answers 404 for another tenant's endpoint (same body as an unknown id) and for another tenant's slug", async () => {
    const mine = await post(owner, { url: HOOK, events: ['agent.revoked'] }).expect(201);
    const id = mine.body.id;
    const unknown = await get(other, '/00000000-0000-4000-8000-000000000000').expect(404);
    expect(unknown.body.code).toBe('webhook/not_found');
    for (const res of [
      await get(other, `/${id}`),
      await get(other, `/${id}/deliveries`),
      await del(other, id),
      await t.http().post(`${base(other.slug)}/${id}/enable`).set('Cookie', other.cookie).set('X-CSRF-Token', other.csrf),
      await get(other, '/not-a-uuid'),
    ]) {
      expect(res.status).toBe(404);
      expect(res.body.code).toBe('webhook/not_found');
      expect(res.body.detail).toBe(unknown.body.detail);
    }
    const list = await get(other).expect(200);
    expect(list.body.data.map((e: { id: string }) => e.id)).not.toContain(id);
    // their session on my slug: no membership
    const slug = await t.http().get(base(owner.slug)).set('Cookie', other.cookie).expect(404);
    expect(slug.body.code).toBe('tenant/not_found');
    await t.http().post(base(owner.slug)).set('Cookie', other.cookie).set('X-CSRF-Token', other.csrf).send({ url: HOOK, events: ['agent.revoked'] }).expect(404);
    // still there
    await get(owner, `/${id}`).expect(200);
  });

  it('deletes an endpoint (204) with its delivery log; a second delete is 404; the deletion is audited', async () => {
    const created = await post(owner, { url: HOOK, events: ['agent.revoked'] }).expect(201);
    const id = created.body.id;
    await t.db.query(
      `INSERT INTO webhook_deliveries (tenant_id, endpoint_id, outbox_id, message_id, event_type, body) VALUES ($1, $2, 1, 'msg_x', 'agent.revoked', '{}')`,
      [owner.tenantId, id],
    );
    const res = await del(owner, id).expect(204);
    expect(res.text).toBe('');
    expect((await get(owner, `/${id}`).expect(404)).body.code).toBe('webhook/not_found');
    expect((await del(owner, id).expect(404)).body.code).toBe('webhook/not_found');
    expect(await t.db.query(`SELECT 1 FROM webhook_deliveries WHERE endpoint_id = $1`, [id])).toHaveLength(0);
    const audit = await t.db.query(`SELECT actor_id, metadata FROM audit_events WHERE type = 'webhook.deleted' AND target_id = $1`, [id]);
    expect(audit).toEqual([{ actor_id: owner.userId, metadata: { url: `${HOOK_ORIGIN}/REDACTED` } }]);
  });

  it('enables a disabled endpoint (owner), idempotently, with one audit event', async () => {
    const created = await post(owner, { url: HOOK, events: ['agent.revoked'] }).expect(201);
    const id = created.body.id;
    await t.db.query(`UPDATE webhook_endpoints SET disabled_at = now(), disabled_reason = 'repeated_failures', consecutive_failed_deliveries = 5 WHERE id = $1`, [id]);
    const disabled = await get(owner, `/${id}`).expect(200);
    expect(disabled.body).toMatchObject({ disabled_at: expect.any(String), disabled_reason: 'repeated_failures' });
    const enable = () => t.http().post(`${base(owner.slug)}/${id}/enable`).set('Cookie', owner.cookie).set('X-CSRF-Token', owner.csrf).expect(200);
    expect((await enable()).body).toMatchObject({ id, disabled_at: null, disabled_reason: null });
    expect((await enable()).body).toMatchObject({ id, disabled_at: null });
    const [row] = await t.db.query<{ consecutive_failed_deliveries: number }>(`SELECT consecutive_failed_deliveries FROM webhook_endpoints WHERE id = $1`, [id]);
    expect(row.consecutive_failed_deliveries).toBe(0);
    // with the URL (no query string), as created, deleted and disabled carry it
    expect(await t.db.query(`SELECT metadata FROM audit_events WHERE type = 'webhook.enabled' AND target_id = $1`, [id])).toEqual([{ metadata: { url: `${HOOK_ORIGIN}/REDACTED` } }]);
  });

  describe('rotate-secret', () => {
    const rotate = (d: { slug: string; cookie: string; csrf: string }, id: string, body?: object) => {
      const r = t.http().post(`${base(d.slug)}/${id}/rotate-secret`).set('Cookie', d.cookie).set('X-CSRF-Token', d.csrf);
      return body === undefined ? r : r.send(body);
    };

    it('answers the endpoint with a new secret shown once; the replaced one is kept encrypted for its overlap (previous_secret_expires_at, default 1 day); audited without secrets', async () => {
      const created = await post(owner, { url: HOOK, events: ['agent.revoked'] }).expect(201);
      const id = created.body.id;
      const res = await rotate(owner, id).expect(200);
      const { secret: oldSecret, ...endpoint } = created.body;
      expect(res.body).toEqual({ ...endpoint, secret: expect.stringMatching(/^whsec_[A-Za-z0-9+/]{43}=$/), previous_secret_expires_at: expect.any(String) });
      expect(res.body.secret).not.toBe(oldSecret);
      const overlap = Date.parse(res.body.previous_secret_expires_at) - Date.now();
      expect(overlap).toBeGreaterThan(86_400_000 - 60_000);
      expect(overlap).toBeLessThanOrEqual(86_400_000);
      const cipher = t.app.get(EnvelopeCipher);
      const [row] = await t.db.query<{ secret_enc: string; previous_secret_enc: string }>(`SELECT secret_enc, previous_secret_enc FROM webhook_endpoints WHERE id = $1`, [id]);
      expect(cipher.decryptString(row.secret_enc, `webhook_endpoint:${id}`)).toBe(res.body.secret);
      expect(cipher.decryptString(row.previous_secret_enc, `webhook_endpoint:${id}`)).toBe(oldSecret);
      for (const v of Object.values(row)) for (const sec of [oldSecret, res.body.secret]) expect(v).not.toContain(sec.slice(6));
      // with 0 the replaced secret stops at once, and the one before it is gone either way
      const now = await rotate(owner, id, { previous_secret_ttl_seconds: 0 }).expect(200);
      expect(now.body.previous_secret_expires_at).toBeNull();
      const [after] = await t.db.query(`SELECT previous_secret_enc, previous_secret_expires_at FROM webhook_endpoints WHERE id = $1`, [id]);
      expect(after).toEqual({ previous_secret_enc: null, previous_secret_expires_at: null });
      const audit = await t.db.query<{ metadata: Record<string, unknown>; severity: string; actor_id: string }>(
        `SELECT metadata, severity, actor_id FROM audit_events WHERE type = 'webhook.secret_rotated' AND target_id = $1 ORDER BY created_at`,
        [id],
      );
      expect(audit).toEqual([
        { metadata: { previous_secret_ttl_seconds: 86400 }, severity: 'medium', actor_id: owner.userId },
        { metadata: { previous_secret_ttl_seconds: 0 }, severity: 'medium', actor_id: owner.userId },
      ]);
      expect(JSON.stringify(audit)).not.toContain('whsec_');
      // still never listed
      expect(JSON.stringify((await get(owner, `/${id}`).expect(200)).body)).not.toContain('secret');
    });

    it.each([
      ['a negative overlap', { previous_secret_ttl_seconds: -1 }],
      ['an overlap over 7 days', { previous_secret_ttl_seconds: 604801 }],
      ['a fractional overlap', { previous_secret_ttl_seconds: 1.5 }],
      ['a string overlap', { previous_secret_ttl_seconds: '60' }],
      ['a null overlap', { previous_secret_ttl_seconds: null }],
      ['an unknown property', { secret: 'whsec_mine' }],
    ])('refuses %s with 400 request/invalid, changing nothing', async (_n, body) => {
      const created = await post(owner, { url: HOOK, events: ['agent.revoked'] }).expect(201);
      const [before] = await t.db.query(`SELECT secret_enc FROM webhook_endpoints WHERE id = $1`, [created.body.id]);
      const res = await rotate(owner, created.body.id, body).expect(400);
      expect(res.body.code).toBe('request/invalid');
      expect(res.body.errors[0].field).toBe(Object.keys(body)[0]);
      expect(await t.db.query(`SELECT secret_enc FROM webhook_endpoints WHERE id = $1`, [created.body.id])).toEqual([before]);
    });

    it("owners only, with the CSRF token; another tenant's or an unknown endpoint is 404", async () => {
      const created = await post(owner, { url: HOOK, events: ['agent.revoked'] }).expect(201);
      const id = created.body.id;
      expect((await rotate({ slug: owner.slug, ...member }, id).expect(403)).body.code).toBe('auth/forbidden');
      expect((await t.http().post(`${base(owner.slug)}/${id}/rotate-secret`).set('Cookie', owner.cookie).expect(403)).body.code).toBe('csrf/invalid');
      expect((await rotate(other, id).expect(404)).body.code).toBe('webhook/not_found');
      expect((await rotate(owner, '00000000-0000-4000-8000-000000000000').expect(404)).body.code).toBe('webhook/not_found');
      expect(await t.db.query(`SELECT 1 FROM audit_events WHERE type = 'webhook.secret_rotated' AND target_id = $1`, [id])).toHaveLength(0);
    });

    it('parallel rotations are serialized: each answers its own secret and one audit row; the last is current, the one before it previous', async () => {
      const created = await post(owner, { url: HOOK, events: ['agent.revoked'] }).expect(201);
      const id = created.body.id;
      const answers = await Promise.all(Array.from({ length: 5 }, () => rotate(owner, id).expect(200)));
      const secrets = answers.map((r) => r.body.secret as string);
      expect(new Set(secrets).size).toBe(5);
      const cipher = t.app.get(EnvelopeCipher);
      const [row] = await t.db.query<{ secret_enc: string; previous_secret_enc: string }>(`SELECT secret_enc, previous_secret_enc FROM webhook_endpoints WHERE id = $1`, [id]);
      const current = cipher.decryptString(row.secret_enc, `webhook_endpoint:${id}`);
      const previous = cipher.decryptString(row.previous_secret_enc, `webhook_endpoint:${id}`);
      // serialized: the current secret is one rotation's, the previous the one just before it (also a rotation's)
      expect(secrets).toContain(current);
      expect(secrets).toContain(previous);
      expect(previous).not.toBe(current);
      expect(await t.db.query(`SELECT 1 FROM audit_events WHERE type = 'webhook.secret_rotated' AND target_id = $1`, [id])).toHaveLength(5);
    });
  });

  it('paginates the list newest first with an opaque cursor; bad limits and tampered cursors are 400', async () => {
    const d = await signupTenant(t);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await post(d, { url: `${HOOK}/${i}`, events: ['agent.revoked'] }).expect(201)).body.id);
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const res: { body: { data: { id: string }[]; pagination: { next_cursor: string | null; has_more: boolean } } } = await get(d, `?limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`).expect(200);
      expect(res.body.data.length).toBeLessThanOrEqual(2);
      seen.push(...res.body.data.map((e: { id: string }) => e.id));
      cursor = res.body.pagination.next_cursor;
      expect(res.body.pagination.has_more).toBe(cursor !== null);
      pages++;
    } while (cursor);
    expect(pages).toBe(3);
    expect(seen).toEqual([...ids].reverse());
    const all = await get(d).expect(200);
    expect(all.body.pagination).toEqual({ next_cursor: null, has_more: false });

    const first = await get(d, '?limit=2').expect(200);
    const c: string = first.body.pagination.next_cursor;
    // change one character of the signature for certain (the old character is never kept)
    const tampered = `${c.slice(0, -2)}${c.at(-2) === 'A' ? 'B' : 'A'}${c.slice(-1)}`;
    expect((await get(d, `?cursor=${encodeURIComponent(tampered)}`).expect(400)).body.code).toBe('request/invalid_cursor');
    for (const q of ['?limit=0', '?limit=101', '?limit=abc', '?foo=1']) expect((await get(d, q).expect(400)).body.code).toBe('request/invalid');
  });

  it('answers an empty delivery log for a new endpoint; a bad status filter is 400', async () => {
    const created = await post(owner, { url: HOOK, events: ['agent.revoked'] }).expect(201);
    const res = await get(owner, `/${created.body.id}/deliveries`).expect(200);
    expect(res.body).toEqual({ data: [], pagination: { next_cursor: null, has_more: false } });
    await get(owner, `/${created.body.id}/deliveries?status=delivered`).expect(200);
    expect((await get(owner, `/${created.body.id}/deliveries?status=lost`).expect(400)).body.code).toBe('request/invalid');
    expect((await get(owner, `/${created.body.id}/deliveries?limit=500`).expect(400)).body.code).toBe('request/invalid');
  });

  it(`holds at most ${MAX_ENDPOINTS_PER_TENANT} endpoints per tenant, also under parallel requests (409 webhook/limit_reached)`, async () => {
    const d = await signupTenant(t);
    const results = await Promise.all(Array.from({ length: MAX_ENDPOINTS_PER_TENANT + 5 }, (_, i) => post(d, { url: `${HOOK}/${i}`, events: ['*'] })));
    const statuses = results.map((r) => r.status);
    expect(statuses.filter((s) => s === 201)).toHaveLength(MAX_ENDPOINTS_PER_TENANT);
    expect(statuses.filter((s) => s === 409)).toHaveLength(5);
    expect(results.find((r) => r.status === 409)!.body.code).toBe('webhook/limit_reached');
    const [{ n }] = await t.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM webhook_endpoints WHERE tenant_id = $1`, [d.tenantId]);
    expect(n).toBe(MAX_ENDPOINTS_PER_TENANT);
    // deleting one frees a slot
    const list = await get(d, '?limit=1').expect(200);
    await del(d, list.body.data[0].id).expect(204);
    await post(d, { url: HOOK, events: ['*'] }).expect(201);
  });
});
