import { createTestApp, randomIp, STRONG_PASSWORD, TestApp, uniqueEmail } from '../../setup/app';
import { createTenant, TenantFixture } from '../../factories/tenant.factory';
import { gateWrites } from '../../setup/hold-writes';
const claims = (token: string): Record<string, string> => JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString());

async function registerUser(t: TestApp, tenant: TenantFixture) {
  const res = await t
    .http()
    .post('/v1/auth/register')
    .set('X-API-Key', tenant.apiKey)
    .set('X-Forwarded-For', randomIp())
    .send({ email: uniqueEmail(), password: STRONG_PASSWORD, consent: true })
    .expect(201);
  return res.body as { access_token: string; refresh_token: string; user: { id: string } };
}

describe('refresh: rotation, reuse detection and the grace rule (contract "Tokens")', () => {
  let t: TestApp;
  let tenant: TenantFixture;
  beforeAll(async () => {
    t = await createTestApp();
    tenant = await createTenant(t.db);
  });
  afterAll(() => t.close());

  const refresh = (token: unknown, key = tenant.apiKey) => t.http().post('/v1/auth/refresh').set('X-API-Key', key).send({ refresh_token: token });

  it('rotates: a new pair for the same session; the new access token works', async () => {
    const u = await registerUser(t, tenant);
    const r = await refresh(u.refresh_token).expect(200);
    expect(r.body.refresh_token).not.toBe(u.refresh_token);
    expect(r.body.user.id).toBe(u.user.id);
    const sid = (tok: string) => JSON.parse(Buffer.from(tok.split('.')[1], 'base64url').toString()).sid;
    expect(sid(r.body.access_token)).toBe(sid(u.access_token));
    await t.http().get('/v1/auth/me').set('Authorization', `Bearer ${r.body.access_token}`).expect(200);
    const [row] = await t.db.query<{ secret_hash: string }>(`SELECT secret_hash FROM refresh_tokens WHERE id = $1`, [r.body.refresh_token.split(':')[0]]);
    expect(row.secret_hash).not.toContain(r.body.refresh_token.split(':')[1]);
  });

  it('the immediate parent presented again within the grace period gets a fresh pair', async () => {
    const u = await registerUser(t, tenant);
    const first = await refresh(u.refresh_token).expect(200);
    const again = await refresh(u.refresh_token).expect(200);
    expect(again.body.refresh_token).not.toBe(first.body.refresh_token);
    await refresh(first.body.refresh_token).expect(200);
  });

  it('a reuse that ends its session counts once in authp_refresh_reuse_total (the same token again, the session already ended, does not)', async () => {
    const count = async () => Number((await t.http().get('/metrics').expect(200)).text.split('\n').find((l) => l.startsWith('authp_refresh_reuse_total '))?.split(' ').pop() ?? 0);
    const before = await count();
    const u = await registerUser(t, tenant);
    await refresh(u.refresh_token).expect(200);
    await t.db.query(`UPDATE refresh_tokens SET rotated_at = now() - interval '1 minute' WHERE id = $1`, [u.refresh_token.split(':')[0]]);
    await refresh(u.refresh_token).expect(401);
    await refresh(u.refresh_token).expect(401);
    expect(await count()).toBe(before + 1);
  });

  it('reuse of a rotated token after the grace period revokes the whole session', async () => {
    const u = await registerUser(t, tenant);
    const first = await refresh(u.refresh_token).expect(200);
    await t.db.query(`UPDATE refresh_tokens SET rotated_at = now() - interval '1 minute' WHERE id = $1`, [u.refresh_token.split(':')[0]]);
    const reuse = await refresh(u.refresh_token).expect(401);
    expect(reuse.body.code).toBe('auth/invalid_refresh_token');
    await refresh(first.body.refresh_token).expect(401);
    await t.http().get('/v1/auth/me').set('Authorization', `Bearer ${first.body.access_token}`).expect(401);
    expect(await t.db.query(`SELECT 1 FROM user_sessions WHERE user_id = $1 AND revoked_reason = 'refresh_token_reuse'`, [u.user.id])).toHaveLength(1);
    // audited in the same transaction, high severity (someone else may hold the session)
    const sid = claims(first.body.access_token).sid;
    expect(await t.db.query(`SELECT severity, actor_type, target_type, target_id, metadata FROM audit_events WHERE type = 'user.session_ended' AND target_id = $1`, [sid])).toEqual([
      { severity: 'high', actor_type: 'system', target_type: 'session', target_id: sid, metadata: { user_id: u.user.id, reason: 'refresh_token_reuse' } },
    ]);
    // presented again: the session had ended, no second row
    await refresh(u.refresh_token).expect(401);
    expect(await t.db.query(`SELECT 1 FROM audit_events WHERE type = 'user.session_ended' AND target_id = $1`, [sid])).toHaveLength(1);
  });

  it('an expired token is only refused, rotated or not: the session goes on (the sweep forgets expired tokens, so reuse detection never depends on them)', async () => {
    const u = await registerUser(t, tenant);
    await t.db.query(`UPDATE refresh_tokens SET expires_at = now() - interval '1 second' WHERE id = $1`, [u.refresh_token.split(':')[0]]);
    expect((await refresh(u.refresh_token).expect(401)).body.detail ?? '').not.toMatch(/reuse/);
    await t.http().get('/v1/auth/me').set('Authorization', `Bearer ${u.access_token}`).expect(200);
    const v = await registerUser(t, tenant);
    const next = await refresh(v.refresh_token).expect(200);
    await t.db.query(`UPDATE refresh_tokens SET rotated_at = now() - interval '1 minute', expires_at = now() - interval '1 second' WHERE id = $1`, [v.refresh_token.split(':')[0]]);
    expect((await refresh(v.refresh_token).expect(401)).body.detail ?? '').not.toMatch(/reuse/);
    await refresh(next.body.refresh_token).expect(200);
    expect(await t.db.query(`SELECT 1 FROM user_sessions WHERE user_id = ANY($1::uuid[]) AND revoked_at IS NOT NULL`, [[u.user.id, v.user.id]])).toHaveLength(0);
  });

  it('a grandparent is reuse even within the grace period', async () => {
    const u = await registerUser(t, tenant);
    const a = await refresh(u.refresh_token).expect(200);
    await refresh(a.body.refresh_token).expect(200);
    await refresh(u.refresh_token).expect(401);
  });

  it('a logout arriving while a refresh of the session commits retires the token that refresh issued too (no live token in an ended session)', async () => {
    const u = await registerUser(t, tenant);
    const sid = JSON.parse(Buffer.from(u.access_token.split('.')[1], 'base64url').toString()).sid as string;
    // the refresh is held inside its statement (session locked, child being inserted) until the
    // logout has arrived and waits for that lock; then the refresh goes on and commits first
    const gate = await gateWrites(t.db, 'refresh_tokens', 'INSERT', `NEW.session_id = '${sid}'`);
    try {
      const ref = refresh(u.refresh_token).then((r) => r);
      const refreshing = await gate.reached();
      const logout = t.http().post('/v1/auth/logout').set('Authorization', `Bearer ${u.access_token}`).then((r) => r);
      await gate.waitedOnBy(refreshing);
      await gate.open();
      const r = await ref;
      expect(r.status).toBe(200); // it committed before the logout did
      expect((await logout).status).toBe(204);
      const live = await t.db.query(`SELECT id FROM refresh_tokens WHERE session_id = $1 AND revoked_at IS NULL`, [sid]);
      expect(live).toHaveLength(0);
      expect((await refresh(r.body.refresh_token).expect(401)).body.code).toBe('auth/invalid_refresh_token');
    } finally {
      await gate.release();
    }
  });

  it('refuses unknown, wrong-secret and other-tenant tokens without ending the session', async () => {
    const u = await registerUser(t, tenant);
    const [id] = u.refresh_token.split(':');
    for (const bad of ['a:b', `${id}:${'A'.repeat(43)}`, `00000000-0000-4000-8000-000000000000:${'A'.repeat(43)}`]) {
      expect((await refresh(bad).expect(401)).body.code).toBe('auth/invalid_refresh_token');
    }
    const other = await createTenant(t.db);
    await refresh(u.refresh_token, other.apiKey).expect(401);
    await refresh(u.refresh_token).expect(200);
  });

  it('validates the body', async () => {
    expect((await refresh('').expect(400)).body.code).toBe('request/invalid');
    expect((await refresh(42).expect(400)).body.code).toBe('request/invalid');
    // spec 2.2: the shape <id>:<secret> is a field constraint
    for (const bad of ['nope', 'a:b:c', ':b', 'a:', 'a :b']) {
      const r = await refresh(bad).expect(400);
      expect(r.body).toMatchObject({ code: 'request/invalid', errors: [{ field: 'refresh_token', message: 'refresh_token must have the shape <id>:<secret>' }] });
    }
    expect((await t.http().post('/v1/auth/refresh').set('X-API-Key', tenant.apiKey).send({ refresh_token: 'a:b', extra: 1 }).expect(400)).body.code).toBe('request/invalid');
    await t.http().post('/v1/auth/refresh').send({ refresh_token: 'a:b' }).expect(401);
  });
});

describe('refresh without a grace period: parallel refreshes of one token have one winner', () => {
  let t: TestApp;
  let tenant: TenantFixture;
  beforeAll(async () => {
    t = await createTestApp({ REFRESH_REUSE_GRACE_SECONDS: '0' });
    tenant = await createTenant(t.db);
  });
  afterAll(() => t.close());

  const sessionEnd = async (refreshToken: string) =>
    (await t.db.query<{ revoked_reason: string | null }>(`SELECT s.revoked_reason FROM user_sessions s JOIN refresh_tokens r ON r.session_id = s.id WHERE r.id = $1`, [refreshToken.split(':')[0]]))[0]
      .revoked_reason;

  it('exactly one of 8 parallel refreshes rotates the token, and the others are reuse: the session ends', async () => {
    const u = await registerUser(t, tenant);
    const results = await Promise.all(Array.from({ length: 8 }, () => t.http().post('/v1/auth/refresh').set('X-API-Key', tenant.apiKey).send({ refresh_token: u.refresh_token })));
    const ok = results.filter((r) => r.status === 200);
    expect(ok).toHaveLength(1);
    for (const r of results) expect([200, 401]).toContain(r.status);
    const children = await t.db.query(`SELECT 1 FROM refresh_tokens WHERE parent_id = $1`, [u.refresh_token.split(':')[0]]);
    expect(children).toHaveLength(1);
    expect(await sessionEnd(u.refresh_token)).toBe('refresh_token_reuse');
  });

  it('two presentations of one token end the session however close together they arrive (a lost race is reuse too, not only a later replay)', async () => {
    // in one rotate batch the duplicate is retried and detected; racing on the session lock the
    // loser read the token before the rotation committed: both ways now end the session, as the
    // same token presented after the first answer does
    const outcomes = await Promise.all(
      Array.from({ length: 12 }, async () => {
        const u = await registerUser(t, tenant);
        const send = () => t.http().post('/v1/auth/refresh').set('X-API-Key', tenant.apiKey).send({ refresh_token: u.refresh_token });
        const statuses = (await Promise.all([send(), send()])).map((r) => r.status).sort();
        return { statuses, end: await sessionEnd(u.refresh_token) };
      }),
    );
    for (const o of outcomes) expect(o).toEqual({ statuses: [200, 401], end: 'refresh_token_reuse' });
    const u = await registerUser(t, tenant);
    await t.http().post('/v1/auth/refresh').set('X-API-Key', tenant.apiKey).send({ refresh_token: u.refresh_token }).expect(200);
    await t.http().post('/v1/auth/refresh').set('X-API-Key', tenant.apiKey).send({ refresh_token: u.refresh_token }).expect(401);
    expect(await sessionEnd(u.refresh_token)).toBe('refresh_token_reuse');
  });
});

describe('rate limits hold across two API instances sharing Redis', () => {
  let a: TestApp;
  let b: TestApp;
  let tenant: TenantFixture;
  beforeAll(async () => {
    a = await createTestApp();
    b = await createTestApp();
    tenant = await createTenant(a.db);
  });
  afterAll(async () => {
    await a.close();
    await b.close();
  });

  it('the 6th register from one address is refused whichever instance serves it', async () => {
    const ip = randomIp();
    const send = (app: TestApp) =>
      app.http().post('/v1/auth/register').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', ip).send({ email: uniqueEmail(), password: STRONG_PASSWORD, consent: true });
    for (let i = 0; i < 5; i++) await send(i % 2 ? a : b).expect(201);
    await send(a).expect(429);
    await send(b).expect(429);
  });
});
