import { performance } from 'perf_hooks';
import Redis from 'ioredis';
import { AgentDenylistService } from '../../../src/modules/agents/agent-denylist.service';
import { AGENT_LIMIT_BUCKETS, agentLimitKey } from '../../../src/modules/agents/agents.service';
import { throttlerKeys } from '../../../src/shared/rate-limit/throttler-storage';
import { REDIS } from '../../../src/shared/redis/redis.module';
import { hashPrefix } from '../../../src/shared/crypto/tokens';
import { AgentFixture, createAgent } from '../../factories/agent.factory';
import { createApiKey, DashboardFixture, signupTenant } from '../../factories/dashboard.factory';
import { createTenant, TenantFixture } from '../../factories/tenant.factory';
import { createTestApp, TestApp } from '../../setup/app';
import { basic, claims, exchangeBody, login, postToken, registerUser, RegisteredUser } from './oauth-helpers';

describe('token exchange fails closed when Redis is unreachable (issue 4 item 3)', () => {
  let t: TestApp;
  let down: TestApp;
  let tenant: TenantFixture;
  let agent: AgentFixture;
  let user: RegisteredUser;

  beforeAll(async () => {
    t = await createTestApp();
    // same database and signing keys, Redis on a closed port
    down = await createTestApp({ REDIS_URL: 'redis://127.0.0.1:1' });
    tenant = await createTenant(t.db, { tier: 'pro' });
    agent = await createAgent(t.db, tenant.id);
    user = await registerUser(t, tenant);
  });
  afterAll(async () => {
    await down.close();
    await t.close();
  });

  it('answers 503 temporarily_unavailable and issues nothing', async () => {
    const st = (await login(t, tenant, user.email)).access_token;
    const res = await postToken(down, agent, exchangeBody(st));
    expect(res.status).toBe(503);
    expect(res.body).toEqual({ error: 'temporarily_unavailable', error_description: expect.any(String) });
    expect(res.headers['retry-after']).toBeDefined();
    expect(res.headers['cache-control']).toBe('no-store');
    const issued = await t.db.query(`SELECT 1 FROM audit_events WHERE type = 'oauth.token_exchange.issued' AND metadata->>'subject_token_jti_hash_prefix' = $1`, [hashPrefix(claims(st).jti as string)]);
    expect(issued).toHaveLength(0);
    expect(await t.db.query(`SELECT 1 FROM agent_actions WHERE agent_client_id = $1`, [agent.id])).toHaveLength(0);
    // the healthy instance serves the same request
    await postToken(t, agent, exchangeBody(st)).expect(200);
  });

  it('introspection and revocation fail closed too (503, never active: true)', async () => {
    const st = (await login(t, tenant, user.email)).access_token;
    const agentToken = (await postToken(t, agent, exchangeBody(st)).expect(200)).body.access_token as string;
    const intro = await down.http().post('/oauth/introspect').type('form').set('Authorization', basic(agent.id, agent.secret)).send({ token: agentToken });
    expect(intro.status).toBe(503);
    expect(intro.body.error).toBe('temporarily_unavailable');
    const rev = await down.http().post('/oauth/revoke').type('form').set('Authorization', basic(agent.id, agent.secret)).send({ token: agentToken });
    expect(rev.status).toBe(503);
    expect(rev.body.error).toBe('temporarily_unavailable');
  });
});

describe('dashboard actions on an agent and the token endpoint (spec 3.2, contract)', () => {
  let t: TestApp;
  let owner: DashboardFixture;
  let tenant: TenantFixture;
  let user: RegisteredUser;
  beforeAll(async () => {
    t = await createTestApp();
    owner = await signupTenant(t);
    await t.db.query(`UPDATE tenants SET tier = 'pro' WHERE id = $1`, [owner.tenantId]);
    await t.tenantChanged(owner.tenantId);
    const key = await createApiKey(t, owner);
    tenant = { id: owner.tenantId, slug: owner.slug, apiKey: key.key, apiKeyId: key.id };
    user = await registerUser(t, tenant);
  });
  afterAll(() => t.close());

  const dashboard = (method: 'post' | 'delete', path: string) => t.http()[method](`/v1/auth/dashboard/tenants/${owner.slug}/agents${path}`).set('Cookie', owner.cookie).set('X-CSRF-Token', owner.csrf);
  const subject = async () => (await login(t, tenant, user.email)).access_token;

  it('disable: the next exchange is unauthorized_client (audited client_disabled)', async () => {
    const agent = await createAgent(t.db, tenant.id);
    await postToken(t, agent, exchangeBody(await subject())).expect(200);
    await dashboard('post', `/${agent.id}/disable`).expect(200);
    const res = await postToken(t, agent, exchangeBody(await subject())).expect(400);
    expect(res.body.error).toBe('unauthorized_client');
    const [row] = await t.db.query<{ metadata: Record<string, unknown> }>(
      `SELECT metadata FROM audit_events WHERE type = 'oauth.token_exchange.client_unauthorized' AND metadata->>'agent_client_id' = $1`,
      [agent.id],
    );
    expect(row.metadata.reason).toBe('client_disabled');
  });

  /** Resolves early in a wall-clock second (the kill and the exchange after it then share it). */
  const startOfSecond = () => new Promise((r) => setTimeout(r, 1000 - (Date.now() % 1000) + 10));

  /**
   * Watches the exchange's reads of the agent's denylist: `waiting` is set once an exchange met the
   * kill of its own second (its first read before the wait, the one with no time bound), and
   * `beforeSecondRead` (when set) runs before the read after the wait.
   */
  function watchDenylist(agentId: string, beforeSecondRead?: () => Promise<unknown>) {
    const denylist = t.app.get(AgentDenylistService);
    const read = denylist.isDenied.bind(denylist);
    const seen = { waiting: false };
    const spy = jest.spyOn(denylist, 'isDenied').mockImplementation(async (id: string, iatSec: number) => {
      if (id === agentId && iatSec === Number.MAX_SAFE_INTEGER && !seen.waiting) seen.waiting = true;
      else if (id === agentId && seen.waiting && beforeSecondRead) await beforeSecondRead();
      return read(id, iatSec);
    });
    return { seen, restore: () => spy.mockRestore() };
  }

  /**
   * Runs a round until the exchange lands in the kill's own second (the case under test). On a slow
   * machine the exchange may start in the next second and is then an ordinary one: a fresh round.
   */
  async function inTheKillSecond(round: (agent: AgentFixture, watch: (before?: () => Promise<unknown>) => { waiting: boolean }) => Promise<boolean>) {
    for (let tries = 0; tries < 5; tries++) {
      const agent = await createAgent(t.db, tenant.id);
      let restore = () => undefined as unknown;
      try {
        const done = await round(agent, (before) => {
          const w = watchDenylist(agent.id, before);
          restore = w.restore;
          return w.seen;
        });
        if (done) return;
      } finally {
        restore();
      }
    }
    throw new Error("no exchange landed in its kill's second in 5 rounds");
  }

  it("kill-tokens: an exchange in the kill's own second waits for the next second and is issued (no 5xx); the token is accepted, earlier ones stay refused", async () => {
    await inTheKillSecond(async (agent, watch) => {
      const old = (await postToken(t, agent, exchangeBody(await subject())).expect(200)).body.access_token as string;
      const st = await subject();
      const seen = watch();
      await startOfSecond();
      const kill = await dashboard('post', `/${agent.id}/kill-tokens`).expect(200);
      const killSecond = Math.floor(Date.parse(kill.body.not_before) / 1000);
      const res = await postToken(t, agent, exchangeBody(st));
      expect(res.status).toBe(200);
      if (!seen.waiting) return false;
      expect(res.headers['retry-after']).toBeUndefined();
      // minted after the kill's second, having waited for the next second only (no Retry-After,
      // no block): answered within a few seconds of that second's start
      const iat = claims(res.body.access_token).iat as number;
      expect(iat).toBeGreaterThan(killSecond);
      expect(Date.now() - (killSecond + 1) * 1000).toBeLessThan(3000);
      await t.http().get('/v1/auth/me').set('Authorization', `Bearer ${res.body.access_token}`).expect(200);
      // a token minted before the kill is still refused
      const me = await t.http().get('/v1/auth/me').set('Authorization', `Bearer ${old}`).expect(401);
      expect(me.headers['www-authenticate']).toContain('agent_revoked');
      return true;
    });
  });

  it("kill-tokens then a revoke while an exchange of the kill's second waits: invalid_client, nothing issued", async () => {
    await inTheKillSecond(async (agent, watch) => {
      const st = await subject();
      let revoked: Promise<unknown> = Promise.resolve();
      // the revoke is sent once the exchange waits, and its read after the wait follows the revoke
      let revokeNow: () => void = () => undefined;
      const waiting = new Promise<void>((resolve) => (revokeNow = resolve));
      const seen = watch(() => {
        revokeNow();
        return revoked;
      });
      await startOfSecond();
      await dashboard('post', `/${agent.id}/kill-tokens`).expect(200);
      const pending = postToken(t, agent, exchangeBody(st)).then((r) => r);
      revoked = Promise.race([waiting.then(() => dashboard('delete', `/${agent.id}`).expect(200)), pending]);
      const res = await pending;
      await revoked;
      if (!seen.waiting) {
        expect(res.status).toBe(200);
        return false;
      }
      expect(res.status).toBe(401);
      expect(res.body.error).toBe('invalid_client');
      expect(await t.db.query(`SELECT 1 FROM audit_events WHERE type = 'oauth.token_exchange.issued' AND actor_id = $1`, [agent.id])).toHaveLength(0);
      return true;
    });
  });

  it('a revoke racing a loop of exchanges: none started after the DELETE returned gets a token; every issued token is refused afterwards', async () => {
    const agent = await createAgent(t.db, tenant.id, { rate_limits: { token_exchange_per_min: 600 } });
    const tokens = await Promise.all(Array.from({ length: 20 }, async () => (await login(t, tenant, user.email)).access_token));

    type Attempt = { startedAt: number; endedAt: number; status: number; token?: string };
    const attempts: Attempt[] = [];
    let stop = false;
    let n = 0;
    const worker = async () => {
      while (!stop) {
        const st = tokens[n++ % tokens.length];
        const startedAt = performance.now();
        const res = await postToken(t, agent, exchangeBody(st));
        attempts.push({ startedAt, endedAt: performance.now(), status: res.status, token: res.body.access_token });
      }
    };
    const loops = [worker(), worker(), worker()];
    // no fixed sleeps: wait for the loop to issue some tokens, then for it to run on after the revoke
    const until = async (cond: () => boolean) => {
      for (let i = 0; i < 300 && !cond(); i++) await new Promise((r) => setTimeout(r, 20));
    };
    await until(() => attempts.filter((a) => a.status === 200).length >= 5);
    const del = await dashboard('delete', `/${agent.id}`);
    const revokedAt = performance.now();
    expect(del.status).toBe(200);
    await until(() => attempts.filter((a) => a.startedAt > revokedAt).length >= 10);
    stop = true;
    await Promise.all(loops);

    const before = attempts.filter((a) => a.status === 200);
    const after = attempts.filter((a) => a.startedAt > revokedAt);
    expect(before.length).toBeGreaterThan(0);
    expect(after.length).toBeGreaterThan(0);
    for (const a of after) {
      expect(a.status).toBe(401);
      expect(a.token).toBeUndefined();
    }
    for (const a of attempts) expect([200, 401]).toContain(a.status);
    // the issued count equals the successful answers: nothing was issued that nobody received
    const issued = await t.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM audit_events WHERE type = 'oauth.token_exchange.issued' AND actor_id = $1`, [agent.id]);
    expect(issued[0].n).toBe(before.length);
    // and every token issued before the revoke is refused now (denylist, spec 5 rule 1)
    for (const a of before.slice(-5)) {
      const me = await t.http().get('/v1/auth/me').set('Authorization', `Bearer ${a.token}`).expect(401);
      expect(me.headers['www-authenticate']).toContain('agent_revoked');
    }
  });

  /**
   * An exchange in a kill's second waits for the next second, then runs again from the start: what
   * it read before the wait (the subject token's revocation, the agent's scopes and token lifetime)
   * is read again, so a change that returned during the wait is not overtaken. Each test makes the
   * kill right before the exchange's denylist read and the change during its wait, through a spy.
   */
  const issuedFor = async (st: string) =>
    (await t.db.query(`SELECT 1 FROM audit_events WHERE type = 'oauth.token_exchange.issued' AND metadata->>'subject_token_jti_hash_prefix' = $1`, [hashPrefix(claims(st).jti as string)])).length;
  const patchAgent = (agent: AgentFixture, body: object) =>
    t.http().patch(`/v1/auth/dashboard/tenants/${owner.slug}/agents/${agent.id}`).set('Cookie', owner.cookie).set('X-CSRF-Token', owner.csrf).send(body).expect(200);
  const kill = (agent: AgentFixture) =>
    t.http().post(`/v1/auth/dashboard/tenants/${owner.slug}/agents/${agent.id}/kill-tokens`).set('Cookie', owner.cookie).set('X-CSRF-Token', owner.csrf).send({}).expect(200);

  /**
   * Kills the agent's tokens right before the exchange's denylist read (so the exchange waits out
   * the kill's second) and runs `change` once the wait has begun. Redone when a second boundary
   * fell between the exchange's clock read and the kill (it then did not wait).
   */
  async function duringTheWait<T>(agentFor: () => Promise<AgentFixture>, change: (agent: AgentFixture) => Promise<unknown>, exchange: (agent: AgentFixture) => Promise<T>): Promise<T> {
    const denylist = t.app.get(AgentDenylistService);
    const read = denylist.isDenied.bind(denylist);
    for (let round = 0; round < 5; round++) {
      const agent = await agentFor();
      let [killed, changed] = [false, false];
      const spy = jest.spyOn(denylist, 'isDenied').mockImplementation(async (id: string, iat: number) => {
        if (id === agent.id && !killed) {
          killed = true;
          await kill(agent);
        } else if (id === agent.id && iat === Number.MAX_SAFE_INTEGER && !changed) {
          // afterKillSecond's revoked check, right before the wait
          changed = true;
          await change(agent);
        }
        return read(id, iat);
      });
      try {
        await new Promise((r) => setTimeout(r, 1000 - (Date.now() % 1000) + 10)); // early in a second
        const res = await exchange(agent);
        if (changed) return res;
      } finally {
        spy.mockRestore();
      }
    }
    throw new Error('no exchange waited out the kill in 5 rounds');
  }

  it('an exchange that waited out the kill\'s second counts once in the rate limits (per client and per subject token), not once per run', async () => {
    // a new agent and subject token each round (a round that did not wait counted them once)
    let [agentId, st] = ['', ''];
    const res = await duringTheWait(
      async () => {
        const a = await createAgent(t.db, tenant.id);
        [agentId, st] = [a.id, await subject()];
        return a;
      },
      async () => undefined,
      (agent) => postToken(t, agent, exchangeBody(st)),
    );
    expect(res.status).toBe(200);
    const jti = claims(st).jti as string;
    const redis = t.app.get<Redis>(REDIS);
    expect(await redis.get(throttlerKeys(`rl:${agentLimitKey(agentId)}`, AGENT_LIMIT_BUCKETS.token_exchange_per_min!).hits)).toBe('1');
    expect(await redis.get(throttlerKeys(`rl:jti:${jti}`, 'token_exchange_jti').hits)).toBe('1');
  });

  it('the subject token revoked (RFC 7009) during the wait: invalid_grant, nothing issued', async () => {
    const st = await subject();
    const res = await duringTheWait(
      () => createAgent(t.db, tenant.id),
      () => t.http().post('/oauth/revoke').type('form').set('X-API-Key', tenant.apiKey).send({ token: st }).expect(200),
      (agent) => postToken(t, agent, exchangeBody(st)),
    );
    expect([res.status, res.body.error]).toEqual([400, 'invalid_grant']);
    expect(await issuedFor(st)).toBe(0);
  });

  it("the agent's scopes narrowed during the wait: the token has the narrower scope", async () => {
    const st = await subject();
    const res = await duringTheWait(
      () => createAgent(t.db, tenant.id, { scopes: ['openid', 'profile', 'email'] }),
      (agent) => patchAgent(agent, { scopes: ['openid'] }),
      (agent) => postToken(t, agent, exchangeBody(st, { scope: 'openid email' })),
    );
    expect([res.status, res.body.scope]).toEqual([200, 'openid']);
    expect(claims(res.body.access_token).scope).toBe('openid');
  });

  /**
   * A PATCH of the agent committed between the exchange's read of the agent (client
   * authentication) and its issuing statement: the statement sees the agent row changed
   * (agent_metadata_version) and issues nothing; the exchange runs again with the agent as it is
   * now. The PATCH is made at the exchange's denylist read (a spy), which lies between the two.
   */
  async function patchedAtDenylistRead<T>(agent: AgentFixture, bodies: object[], exchange: () => Promise<T>): Promise<T> {
    const denylist = t.app.get(AgentDenylistService);
    const read = denylist.isDenied.bind(denylist);
    const pending = [...bodies];
    const spy = jest.spyOn(denylist, 'isDenied').mockImplementation(async (id: string, iat: number) => {
      const body = id === agent.id ? pending.shift() : undefined;
      if (body) await patchAgent(agent, body);
      return read(id, iat);
    });
    try {
      return await exchange();
    } finally {
      spy.mockRestore();
    }
  }

  it("the agent's scopes and token lifetime narrowed after the exchange read the agent: the token has the narrower ones (run again), counted once", async () => {
    const st = await subject();
    const agent = await createAgent(t.db, tenant.id, { scopes: ['openid', 'profile', 'email'], agent_token_max_ttl_sec: 900 });
    const res = await patchedAtDenylistRead(agent, [{ scopes: ['openid'], agent_token_max_ttl_sec: 60 }], () => postToken(t, agent, exchangeBody(st, { scope: 'openid email', expires_in: '900' })));
    expect([res.status, res.body.scope, res.body.expires_in]).toEqual([200, 'openid', 60]);
    const c = claims(res.body.access_token);
    expect([c.scope, (c.exp as number) - (c.iat as number)]).toEqual(['openid', 60]);
    expect(await issuedFor(st)).toBe(1);
    const redis = t.app.get<Redis>(REDIS);
    expect(await redis.get(throttlerKeys(`rl:${agentLimitKey(agent.id)}`, AGENT_LIMIT_BUCKETS.token_exchange_per_min!).hits)).toBe('1');
  });

  it('the agent changed again while the exchange ran again: 503 temporarily_unavailable (Retry-After), nothing issued', async () => {
    const st = await subject();
    const agent = await createAgent(t.db, tenant.id, { scopes: ['openid', 'profile', 'email'] });
    const res = await patchedAtDenylistRead(agent, [{ scopes: ['openid', 'email'] }, { scopes: ['openid'] }], () => postToken(t, agent, exchangeBody(st)));
    expect([res.status, res.body.error, res.headers['retry-after']]).toEqual([503, 'temporarily_unavailable', '1']);
    expect(await issuedFor(st)).toBe(0);
    // sent again: the agent as it is now
    expect((await postToken(t, agent, exchangeBody(st)).expect(200)).body.scope).toBe('openid');
  });

  it("the agent's token lifetime lowered during the wait: the token lives within the new maximum", async () => {
    const st = await subject();
    const res = await duringTheWait(
      () => createAgent(t.db, tenant.id, { agent_token_max_ttl_sec: 900 }),
      (agent) => patchAgent(agent, { agent_token_max_ttl_sec: 60 }),
      (agent) => postToken(t, agent, exchangeBody(st, { expires_in: '900' })),
    );
    expect([res.status, res.body.expires_in]).toEqual([200, 60]);
    const c = claims(res.body.access_token);
    expect((c.exp as number) - (c.iat as number)).toBe(60);
    // issued after the kill's second: the bearer guard accepts it
    await t.http().get('/v1/auth/me').set('Authorization', `Bearer ${res.body.access_token}`).expect(200);
  });
});
