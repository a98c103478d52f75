import type { PoolClient } from 'pg';
import { createTestApp, randomIp, STRONG_PASSWORD, TestApp, uniqueEmail } from '../../setup/app';
import { createAgent } from '../../factories/agent.factory';
import { createTenant, TenantFixture } from '../../factories/tenant.factory';
import { exchangeBody, login, postToken, registerUser } from '../oauth/oauth-helpers';

/**
 * Guest sign-ins and refreshes that arrive together share one statement (src/shared/db/batcher.ts).
 * Each test holds a row lock so that the first calls stay in flight (both slots busy) while the
 * next ones queue; releasing it lets the queue go as one batch. The db_batch_* metrics show which
 * statements ran, so a batch statement that failed (and fell back to one statement per item)
 * fails the test instead of hiding behind the fallback.
 */
describe('write batching: concurrent guest sign-ins and refreshes share one statement', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp({ REFRESH_REUSE_GRACE_SECONDS: '0' });
  });
  afterAll(() => t.close());

  const anon = (tenant: TenantFixture, body: object = {}) => t.http().post('/v1/auth/anonymous').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', randomIp()).send(body);
  /** public_metadata that an array literal must quote and escape on its way to jsonb[] */
  const tricky = { note: 'a "quoted" {braced}, back\\slash and comma', emoji: '😀 ü', nested: { list: [1, 'two', null, { deep: true }] }, empty: '' };
  const refresh = (token: string, tenant: TenantFixture) => t.http().post('/v1/auth/refresh').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', randomIp()).send({ refresh_token: token });
  const register = async (tenant: TenantFixture) =>
    (await t.http().post('/v1/auth/register').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', randomIp()).send({ email: uniqueEmail(), password: STRONG_PASSWORD, consent: true }).expect(201)).body;

  async function counters(batcher: string): Promise<Record<string, number>> {
    const text = (await t.http().get('/metrics').expect(200)).text;
    const out: Record<string, number> = { single: 0, batch: 0, retry: 0, items: 0 };
    for (const line of text.split('\n')) {
      const m = /^db_batch_statements_total\{batcher="([^"]+)",kind="([^"]+)"\} (\d+)/.exec(line);
      if (m && m[1] === batcher) out[m[2]] = Number(m[3]);
      const i = /^db_batch_items_total\{batcher="([^"]+)"\} (\d+)/.exec(line);
      if (i && i[1] === batcher) out.items = Number(i[2]);
    }
    return out;
  }
  async function queued(batcher: string): Promise<number> {
    const text = (await t.http().get('/metrics').expect(200)).text;
    const m = new RegExp(`^db_batch_queued\\{batcher="${batcher}"\\} (\\d+)`, 'm').exec(text);
    return m ? Number(m[1]) : 0;
  }
  const delta = (a: Record<string, number>, b: Record<string, number>) => Object.fromEntries(Object.keys(b).map((k) => [k, b[k] - (a[k] ?? 0)]));

  /** Holds `lockSql` in an open transaction; resolves once `waiters` statements wait for it. */
  async function holdLock(lockSql: string, params: unknown[]): Promise<{ client: PoolClient; waitFor: (waiters: number) => Promise<void>; release: () => Promise<void> }> {
    const client = await t.db.pool.connect();
    await client.query('BEGIN');
    await client.query(lockSql, params);
    const pid = (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0].pid;
    return {
      client,
      waitFor: async (waiters) => {
        for (let i = 0; i < 200; i++) {
          // waiting on the lock, or on another statement that waits on it
          const [r] = await t.db.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> $1`,
            [pid],
          );
          if (r.n >= waiters) return;
          await new Promise((res) => setTimeout(res, 25));
        }
        throw new Error('the statements never queued behind the lock');
      },
      release: async () => {
        await client.query('COMMIT');
        client.release();
      },
    };
  }

  /** Sends `first` (they block on the lock: both slots busy), then `rest`, then releases the lock. */
  async function queuedBehind<T>(batcher: string, lock: Awaited<ReturnType<typeof holdLock>>, first: (() => PromiseLike<T>)[], rest: (() => PromiseLike<T>)[]): Promise<T[]> {
    // supertest sends when awaited: Promise.resolve starts each request now
    const a = first.map((f) => Promise.resolve(f()));
    let b: Promise<T>[] = [];
    try {
      await lock.waitFor(first.length);
      b = rest.map((f) => Promise.resolve(f()));
      // the rest pass HTTP, guards and validation into the batcher's queue (its depth, db_batch_queued)
      for (let i = 0; i < 200 && (await queued(batcher)) < rest.length; i++) await new Promise((res) => setTimeout(res, 25));
    } finally {
      await lock.release();
    }
    return Promise.all([...a, ...b]);
  }

  it('guest sign-ins queued together: one statement, every guest whole (user, session, refresh token), the monthly count exact', async () => {
    const tenant = await createTenant(t.db, { anonymous_signins_enabled: true, tier: 'enterprise' });
    const other = await createTenant(t.db, { anonymous_signins_enabled: true, tier: 'enterprise' });
    await anon(tenant).expect(201); // the tenant's counter row exists
    const before = await counters('guest_create');
    const lock = await holdLock(`SELECT 1 FROM tenant_mau WHERE tenant_id = $1 FOR UPDATE`, [tenant.id]);
    const results = await queuedBehind('guest_create',
      lock,
      [() => anon(tenant), () => anon(tenant)],
      [...Array.from({ length: 10 }, (_, k) => () => anon(tenant, k % 2 ? { public_metadata: { ...tricky, k } } : {})), ...Array.from({ length: 5 }, () => () => anon(other))],
    );
    for (const r of results) expect(r.status).toBe(201);
    const d = delta(before, await counters('guest_create'));
    expect(d).toMatchObject({ single: 2, batch: 1, retry: 0, items: 17 });
    const ids = results.map((r) => r.body.user.id);
    expect(new Set(ids).size).toBe(17);
    const rows = await t.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM users u JOIN user_sessions s ON s.user_id = u.id JOIN refresh_tokens rt ON rt.session_id = s.id
        WHERE u.id = ANY($1) AND u.is_anonymous AND u.mau_month IS NOT NULL`,
      [ids],
    );
    expect(rows[0].n).toBe(17);
    const mau = await t.db.query<{ tenant_id: string; active_users: number }>(`SELECT tenant_id, active_users FROM tenant_mau WHERE tenant_id = ANY($1)`, [[tenant.id, other.id]]);
    expect(Object.fromEntries(mau.map((m) => [m.tenant_id, m.active_users]))).toEqual({ [tenant.id]: 13, [other.id]: 5 });
    // the batched guests are real: their tokens refresh, their metadata comes back as sent
    for (const r of results.slice(2, 4)) await refresh(r.body.refresh_token, tenant).expect(200);
    for (const [k, r] of results.slice(2, 12).entries()) {
      const me = await t.http().get('/v1/auth/me').set('Authorization', `Bearer ${r.body.access_token}`).expect(200);
      expect(me.body.public_metadata).toEqual(k % 2 ? { ...tricky, k } : {});
    }
  });

  it('a batch that does not fit the monthly allowance admits exactly what is left, one by one', async () => {
    const tenant = await createTenant(t.db, { anonymous_signins_enabled: true, tier: 'free' });
    await anon(tenant).expect(201);
    await t.db.query(`UPDATE tenant_mau SET active_users = 9995 WHERE tenant_id = $1`, [tenant.id]);
    const before = await counters('guest_create');
    const lock = await holdLock(`SELECT 1 FROM tenant_mau WHERE tenant_id = $1 FOR UPDATE`, [tenant.id]);
    const results = await queuedBehind('guest_create', lock, [() => anon(tenant), () => anon(tenant)], Array.from({ length: 10 }, () => () => anon(tenant)));
    expect(results.filter((r) => r.status === 201)).toHaveLength(5);
    const refused = results.filter((r) => r.status !== 201);
    expect(refused).toHaveLength(7);
    for (const r of refused) expect(r.body).toMatchObject({ status: 403, code: 'anonymous/mau_exhausted' });
    const [m] = await t.db.query<{ active_users: number }>(`SELECT active_users FROM tenant_mau WHERE tenant_id = $1`, [tenant.id]);
    expect(m.active_users).toBe(10000);
    const [{ n }] = await t.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM users WHERE tenant_id = $1`, [tenant.id]);
    expect(n).toBe(6);
    // the batch statement ran and refused the tenant's whole group; its guests went one by one
    expect(delta(before, await counters('guest_create'))).toMatchObject({ single: 2, batch: 1, retry: 0, items: 12 });
  });

  it('refreshes queued together: one statement rotates each token once; a token twice in the batch has one winner; monthly counts move per user', async () => {
    const tenant = await createTenant(t.db, { anonymous_signins_enabled: true, tier: 'enterprise' });
    const blockers = [await register(tenant), await register(tenant)];
    const users = await Promise.all(Array.from({ length: 6 }, () => register(tenant)));
    const guests = await Promise.all(Array.from({ length: 4 }, async () => (await anon(tenant).expect(201)).body));
    // two of them were last active in an earlier month: this refresh counts them in this one
    const stale = [users[0].user.id, guests[0].user.id];
    await t.db.query(`UPDATE users SET mau_month = '2000-01-01', last_active_at = now() - interval '2 minutes' WHERE id = ANY($1)`, [stale]);
    await t.db.query(`DELETE FROM tenant_mau_users WHERE user_id = ANY($1)`, [stale]);
    const [m0] = await t.db.query<{ active_users: number }>(`SELECT active_users FROM tenant_mau WHERE tenant_id = $1`, [tenant.id]);
    const before = await counters('refresh_rotate');
    const lock = await holdLock(`SELECT 1 FROM refresh_tokens WHERE id = ANY($1) FOR UPDATE`, [blockers.map((b) => b.refresh_token.split(':')[0])]);
    const tokens = [...users, ...guests].map((u) => u.refresh_token as string);
    const results = await queuedBehind('refresh_rotate', 
      lock,
      blockers.map((b) => () => refresh(b.refresh_token, tenant)),
      [...tokens.map((tok) => () => refresh(tok, tenant)), () => refresh(tokens[1], tenant)],
    );
    const [b1, b2, ...rest] = results;
    expect([b1.status, b2.status]).toEqual([200, 200]);
    // every token but the one presented twice: rotated once, a working pair
    for (const [k, r] of rest.slice(0, tokens.length).entries()) if (k !== 1) expect(r.status).toBe(200);
    const twice = [rest[1], rest[tokens.length]];
    expect(twice.map((r) => r.status).sort()).toEqual([200, 401]);
    for (const tok of tokens) {
      const children = await t.db.query(`SELECT 1 FROM refresh_tokens WHERE parent_id = $1`, [tok.split(':')[0]]);
      expect(children).toHaveLength(1);
    }
    expect(delta(before, await counters('refresh_rotate'))).toMatchObject({ single: 2, batch: 1, retry: 0, items: 13 });
    const [m1] = await t.db.query<{ active_users: number }>(`SELECT active_users FROM tenant_mau WHERE tenant_id = $1`, [tenant.id]);
    expect(m1.active_users - m0.active_users).toBe(2);
    // the new tokens work
    await refresh(rest[0].body.refresh_token, tenant).expect(200);
    await t.http().get('/v1/auth/me').set('Authorization', `Bearer ${rest[5].body.access_token}`).expect(200);
  });

  it('token exchanges queued together: one statement, each row under its own guards (a withdrawn pair writes nothing)', async () => {
    const tenant = await createTenant(t.db, { tier: 'pro' });
    const agent = await createAgent(t.db, tenant.id, { rate_limits: { token_exchange_per_min: 600 } });
    const users = await Promise.all(Array.from({ length: 10 }, () => registerUser(t, tenant)));
    // the last user withdraws the agent (spec 3.3): only the issuing statement's guard refuses it now
    const withdrawn = users[9];
    await t.http().delete(`/v1/users/me/agents/${agent.id}`).set('Authorization', `Bearer ${withdrawn.access_token}`).expect(200);
    const withdrawnToken = (await login(t, tenant, withdrawn.email)).access_token;
    const subjects = [...users.slice(0, 9).map((u) => u.access_token), withdrawnToken];
    const before = await counters('token_exchange_issue');
    const lock = await holdLock(`LOCK TABLE agent_actions IN SHARE MODE`, []);
    const results = await queuedBehind('token_exchange_issue', 
      lock,
      subjects.slice(0, 2).map((st) => () => postToken(t, agent, exchangeBody(st, { scope: 'openid' }))),
      subjects.slice(2).map((st) => () => postToken(t, agent, exchangeBody(st, { scope: 'openid' }))),
    );
    expect(results.slice(0, 9).map((r) => r.status)).toEqual(Array(9).fill(200));
    expect(results[9].status).toBe(400);
    expect(results[9].body).toMatchObject({ error: 'invalid_grant', error_description: 'Subject token revoked' });
    expect(delta(before, await counters('token_exchange_issue'))).toMatchObject({ single: 2, batch: 1, retry: 0, items: 10 });
    const actions = await t.db.query<{ actor_user_id: string; jti: string }>(`SELECT actor_user_id, jti FROM agent_actions WHERE agent_client_id = $1 AND action = 'token_exchange'`, [agent.id]);
    expect(actions.map((a) => a.actor_user_id).sort()).toEqual(users.slice(0, 9).map((u) => u.id).sort());
    const issuedJtis = results.slice(0, 9).map((r) => JSON.parse(Buffer.from(r.body.access_token.split('.')[1], 'base64url').toString()).jti);
    expect(actions.map((a) => a.jti).sort()).toEqual(issuedJtis.sort());
    const audit = await t.db.query<{ target_id: string }>(`SELECT target_id FROM audit_events WHERE actor_id = $1 AND type = 'oauth.token_exchange.issued'`, [agent.id]);
    expect(audit.map((a) => a.target_id).sort()).toEqual(users.slice(0, 9).map((u) => u.id).sort());
    const outbox = await t.db.query<{ user_id: string }>(`SELECT payload->>'user_id' AS user_id FROM outbox WHERE event_type = 'oauth.token_exchange.issued' AND payload->>'agent_client_id' = $1`, [agent.id]);
    expect(outbox.map((o) => o.user_id).sort()).toEqual(users.slice(0, 9).map((u) => u.id).sort());
    const refused = await t.db.query<{ reason: string }>(`SELECT metadata->>'subject_invalid_reason' AS reason FROM audit_events WHERE actor_id = $1 AND type = 'oauth.token_exchange.subject_invalid'`, [agent.id]);
    expect(refused).toEqual([{ reason: 'agent_revoked_by_user' }]);
  });
});
