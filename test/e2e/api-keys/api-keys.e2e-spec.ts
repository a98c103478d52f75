import { createTestApp, randomIp, STRONG_PASSWORD, TestApp, uniqueEmail } from '../../setup/app';
import { createApiKey, DashboardFixture, signupTenant } from '../../factories/dashboard.factory';

describe('API keys (contract "Onboarding and the dashboard")', () => {
  let t: TestApp;
  let a: DashboardFixture;
  let b: DashboardFixture;
  beforeAll(async () => {
    t = await createTestApp();
    a = await signupTenant(t);
    b = await signupTenant(t);
  });
  afterAll(() => t.close());

  const url = (d: DashboardFixture) => `/v1/auth/dashboard/tenants/${d.slug}/api-keys`;
  const register = (key: string) =>
    t.http().post('/v1/auth/register').set('X-API-Key', key).set('X-Forwarded-For', randomIp()).send({ email: uniqueEmail(), password: STRONG_PASSWORD, consent: true });

  it('creates a key shown once, stores only its hash, lists it without the key', async () => {
    const res = await t.http().post(url(a)).set('Cookie', a.cookie).set('X-CSRF-Token', a.csrf).send({ name: 'backend' }).expect(201);
    expect(res.body).toEqual({ id: expect.any(String), name: 'backend', key: expect.stringMatching(/^authp_[A-Za-z0-9_-]{43}$/), prefix: res.body.key.slice(0, 14), created_at: expect.any(String) });
    const [row] = await t.db.query<Record<string, unknown>>(`SELECT * FROM api_keys WHERE id = $1`, [res.body.id]);
    expect(Object.values(row).map(String)).not.toContain(res.body.key);
    const list = await t.http().get(url(a)).set('Cookie', a.cookie).expect(200);
    expect(list.body.pagination).toEqual({ next_cursor: null, has_more: false });
    const item = list.body.data.find((k: { id: string }) => k.id === res.body.id);
    expect(item).toEqual({ id: res.body.id, name: 'backend', prefix: res.body.prefix, created_at: res.body.created_at, revoked_at: null });
    expect(JSON.stringify(list.body)).not.toContain(res.body.key);
    await register(res.body.key).expect(201);
  });

  it('a tenant holds at most 50 live keys (409 api_key/limit_reached, nothing created, even in parallel); revoking one makes room', async () => {
    const d = await signupTenant(t);
    const create = (name: string) => t.http().post(url(d)).set('Cookie', d.cookie).set('X-CSRF-Token', d.csrf).set('X-Forwarded-For', randomIp()).send({ name });
    for (let i = 0; i < 45; i++) await create(`k${i}`).expect(201);
    const burst = await Promise.all(Array.from({ length: 10 }, (_, i) => create(`p${i}`)));
    expect(burst.map((r) => r.status).sort()).toEqual([...Array(5).fill(201), ...Array(5).fill(409)]);
    expect(burst.find((r) => r.status === 409)!.body.code).toBe('api_key/limit_reached');
    expect(await t.db.query(`SELECT 1 FROM api_keys WHERE tenant_id = $1`, [d.tenantId])).toHaveLength(50);
    const [first] = await t.db.query<{ id: string }>(`SELECT id FROM api_keys WHERE tenant_id = $1 LIMIT 1`, [d.tenantId]);
    await t.http().delete(`${url(d)}/${first.id}`).set('Cookie', d.cookie).set('X-CSRF-Token', d.csrf).expect(200);
    await create('after-revoke').expect(201);
    await create('one-too-many').expect(409);
  });

  it('rejects a bad name', async () => {
    for (const body of [{}, { name: '' }, { name: 'x'.repeat(101) }, { name: 'ok', scope: 'all' }, { name: '\u200b' }, { name: 'prod\u0000' }, { name: 'line\nbreak' }, { name: '\u034f\u034f' }, { name: '\ufe0f' }, { name: '\u3164\u3164' }, { name: '\u2800' }, { name: '\u17b4\u17b5' }]) {
      const res = await t.http().post(url(a)).set('Cookie', a.cookie).set('X-CSRF-Token', a.csrf).send(body).expect(400);
      expect(res.body.code).toBe('request/invalid');
    }
  });

  it('revokes a key (idempotent: the same revoked_at, one audit event); the key then answers 401', async () => {
    const k = await createApiKey(t, a);
    const r1 = await t.http().delete(`${url(a)}/${k.id}`).set('Cookie', a.cookie).set('X-CSRF-Token', a.csrf).expect(200);
    expect(r1.body).toEqual({ id: k.id, revoked_at: expect.any(String) });
    const r2 = await t.http().delete(`${url(a)}/${k.id}`).set('Cookie', a.cookie).set('X-CSRF-Token', a.csrf).expect(200);
    expect(r2.body.revoked_at).toBe(r1.body.revoked_at);
    expect(await t.db.query(`SELECT 1 FROM audit_events WHERE type = 'api_key.revoked' AND target_id = $1`, [k.id])).toHaveLength(1);
    const res = await register(k.key).expect(401);
    expect(res.body.code).toBe('auth/invalid_api_key');
    expect((await register('authp_unknown').expect(401)).body.code).toBe('auth/invalid_api_key');
    const none = await t.http().post('/v1/auth/login').send({ email: uniqueEmail(), password: STRONG_PASSWORD }).expect(401);
    expect(none.body.code).toBe('auth/invalid_api_key');
  });

  it("answers 404 for another tenant's key id, an unknown id and a malformed id", async () => {
    const kb = await createApiKey(t, b);
    const cross = await t.http().delete(`${url(a)}/${kb.id}`).set('Cookie', a.cookie).set('X-CSRF-Token', a.csrf).expect(404);
    const unknown = await t.http().delete(`${url(a)}/00000000-0000-4000-8000-000000000000`).set('Cookie', a.cookie).set('X-CSRF-Token', a.csrf).expect(404);
    const bad = await t.http().delete(`${url(a)}/not-a-uuid`).set('Cookie', a.cookie).set('X-CSRF-Token', a.csrf).expect(404);
    expect(cross.body.code).toBe('api_key/not_found');
    expect(unknown.body).toEqual({ ...cross.body, request_id: unknown.body.request_id });
    expect(bad.body.code).toBe('api_key/not_found');
    // b's key still works
    await register(kb.key).expect(201);
  });

  it('paginates with an opaque cursor; a tampered cursor is 400', async () => {
    const c = await signupTenant(t);
    for (let i = 0; i < 3; i++) await createApiKey(t, c, `k${i}`);
    const p1 = await t.http().get(`${url(c)}?limit=2`).set('Cookie', c.cookie).expect(200);
    expect(p1.body.data).toHaveLength(2);
    expect(p1.body.pagination.has_more).toBe(true);
    const p2 = await t.http().get(`${url(c)}?limit=2&cursor=${encodeURIComponent(p1.body.pagination.next_cursor)}`).set('Cookie', c.cookie).expect(200);
    expect(p2.body.data).toHaveLength(1);
    expect(p2.body.pagination).toEqual({ next_cursor: null, has_more: false });
    const names = [...p1.body.data, ...p2.body.data].map((k: { name: string }) => k.name);
    expect(names).toEqual(['k2', 'k1', 'k0']);
    const tampered = p1.body.pagination.next_cursor.replace(/^./, (ch: string) => (ch === 'A' ? 'B' : 'A'));
    expect((await t.http().get(`${url(c)}?cursor=${encodeURIComponent(tampered)}`).set('Cookie', c.cookie).expect(400)).body.code).toBe('request/invalid_cursor');
    const nonAscii = `${p1.body.pagination.next_cursor.split('.')[0]}.${'é'.repeat(22)}`;
    expect((await t.http().get(`${url(c)}?cursor=${encodeURIComponent(nonAscii)}`).set('Cookie', c.cookie).expect(400)).body.code).toBe('request/invalid_cursor');
    expect((await t.http().get(`${url(c)}?limit=0`).set('Cookie', c.cookie).expect(400)).body.code).toBe('request/invalid');
    expect((await t.http().get(`${url(c)}?limit=101`).set('Cookie', c.cookie).expect(400)).body.code).toBe('request/invalid');
  });

  it("a cursor works only on the list that issued it: not on another tenant's keys, nor on another list", async () => {
    const a = await signupTenant(t);
    const b = await signupTenant(t);
    for (const d of [a, b]) for (let i = 0; i < 2; i++) await createApiKey(t, d, `k${i}`);
    const cursor = encodeURIComponent((await t.http().get(`${url(a)}?limit=1`).set('Cookie', a.cookie).expect(200)).body.pagination.next_cursor);
    await t.http().get(`${url(a)}?limit=1&cursor=${cursor}`).set('Cookie', a.cookie).expect(200);
    const otherTenant = await t.http().get(`${url(b)}?limit=1&cursor=${cursor}`).set('Cookie', b.cookie).expect(400);
    expect(otherTenant.body.code).toBe('request/invalid_cursor');
    const otherList = await t.http().get(`/v1/auth/dashboard/tenants/${a.slug}/webhooks?cursor=${cursor}`).set('Cookie', a.cookie).expect(400);
    expect(otherList.body.code).toBe('request/invalid_cursor');
  });
});
