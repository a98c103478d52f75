import Redis from 'ioredis';
import { REDIS } from '../../../src/shared/redis/redis.module';
import { Db } from '../../../src/shared/db/db.service';
import { AgentTokenSlotsService } from '../../../src/modules/agents/agent-token-slots.service';
import { createAgent } from '../../factories/agent.factory';
import { createTestApp, TestApp } from '../../setup/app';
import { auditRows, basic, claims, exchangeBody, postToken } from '../oauth/oauth-helpers';
import { agentsUrl, agentToken, as, bearerCall, endUser, EndUser, flushTestPrefix, insertAction, nextSecond, rawRedis, registerAgent, sleep, tenantOnTier } from './agents.helpers';

type Res = { status: number; body: Record<string, unknown>; headers: Record<string, string> };

// spec 2.10 / 8 agent_settings.rate_limits.api_calls_per_min and agent_settings.max_concurrent_tokens;
// spec 6 agent.rate_limited; spec 7.1 429 with Retry-After and X-Service-Docs
describe('agent usage limits: api_calls_per_min and max_concurrent_tokens (spec 2.10, 6, 8)', () => {
  let t: TestApp;
  let redis: Redis;
  beforeAll(async () => {
    // a 1 s in-process memory of agent limits, so a PATCH shows within the test
    t = await createTestApp({ AGENT_LIMITS_LOCAL_TTL_SECONDS: '1' });
    redis = t.app.get<Redis>(REDIS);
  });
  afterAll(() => t.close());

  const expectProblem429 = (res: Res) => {
    expect(res.status).toBe(429);
    expect(Number(res.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(Number(res.headers['retry-after'])).toBeLessThanOrEqual(60);
    expect(res.headers['x-service-docs']).toMatch(/^https?:\/\//);
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(res.body).toMatchObject({ status: 429, code: 'rate_limit/exceeded' });
  };
  const rlKey = (agentId: string) => `{rl:agent:${agentId}:agent_api_calls}:hits`;
  /** An agent with an api_calls_per_min limit, its owner and a token of an end user's. */
  const limitedAgent = async (apiCallsPerMin: number) => {
    const owner = await tenantOnTier(t, 'pro');
    const u = await endUser(t, owner);
    const a = await registerAgent(t, owner, { agent_settings: { rate_limits: { api_calls_per_min: apiCallsPerMin } } });
    const { token } = await agentToken(t, u, a.id);
    return { owner, a, token };
  };

  describe('api_calls_per_min', () => {
    it('counts bearer calls of all the agent tokens (across users); past the limit 429, one agent.rate_limited per window', async () => {
      const owner = await tenantOnTier(t, 'pro');
      const [u1, u2] = [await endUser(t, owner), await endUser(t, owner)];
      const limited = await registerAgent(t, owner, { agent_settings: { rate_limits: { api_calls_per_min: 3 } } });
      const other = await registerAgent(t, owner, { agent_settings: { rate_limits: { api_calls_per_min: 3 } } });
      const unlimited = await registerAgent(t, owner);
      const tok1 = (await agentToken(t, u1, limited.id)).token;
      const tok2 = (await agentToken(t, u2, limited.id)).token;
      const tok1b = (await agentToken(t, u1, limited.id)).token;

      await bearerCall(t, tok1).expect(200);
      await bearerCall(t, tok2).expect(200);
      await bearerCall(t, tok1b).expect(200);
      expectProblem429(await bearerCall(t, tok2));
      expectProblem429(await bearerCall(t, tok1));
      expectProblem429(await bearerCall(t, tok1b));

      const rows = await auditRows(t, 'agent.rate_limited', limited.id);
      expect(rows).toHaveLength(1);
      expect(rows[0].metadata).toMatchObject({ agent_client_id: limited.id, limit_scope: 'api_calls', rate_limit_key: 'api_calls_per_min', computed_limit: 3, window_seconds: 60 });
      const outbox = await t.db.query<{ topic: string; payload: Record<string, unknown> }>(
        `SELECT topic, payload FROM outbox WHERE event_type = 'agent.rate_limited' AND payload->>'agent_client_id' = $1`,
        [limited.id],
      );
      expect(outbox).toHaveLength(1);
      expect(outbox[0]).toMatchObject({ topic: 'webhook', payload: { limit_scope: 'api_calls', computed_limit: 3 } });

      // another agent with the same limit, an agent without one, and the users' own tokens: unaffected
      const otherTok = (await agentToken(t, u1, other.id)).token;
      for (let i = 0; i < 3; i++) await bearerCall(t, otherTok).expect(200);
      const freeTok = (await agentToken(t, u1, unlimited.id)).token;
      for (let i = 0; i < 8; i++) await bearerCall(t, freeTok).expect(200);
      for (let i = 0; i < 8; i++) await bearerCall(t, u1.accessToken).expect(200);
    });

    it('a revoked token is 401, not 429, even past the limit', async () => {
      const owner = await tenantOnTier(t, 'pro');
      const u = await endUser(t, owner);
      const a = await registerAgent(t, owner, { agent_settings: { rate_limits: { api_calls_per_min: 1 } } });
      const { token } = await agentToken(t, u, a.id);
      await bearerCall(t, token).expect(200);
      expectProblem429(await bearerCall(t, token));
      await as(t, owner).delete(agentsUrl(owner, `/${a.id}`)).expect(200);
      await bearerCall(t, token).expect(401);
    });

    it('revoked (/oauth/revoke) and killed tokens do not use up the limit: a new valid token still gets its calls', async () => {
      const owner = await tenantOnTier(t, 'pro');
      const u = await endUser(t, owner);
      const a = await registerAgent(t, owner, { agent_settings: { rate_limits: { api_calls_per_min: 3 } } });
      const revoked = (await agentToken(t, u, a.id)).token;
      await t.http().post('/oauth/revoke').type('form').set('Authorization', basic(a.id, a.client_secret)).send({ token: revoked }).expect(200);
      for (let i = 0; i < 6; i++) await bearerCall(t, revoked).expect(401);
      const killed = (await agentToken(t, u, a.id)).token;
      await as(t, owner).post(agentsUrl(owner, `/${a.id}/kill-tokens`)).expect(200);
      await nextSecond();
      for (let i = 0; i < 6; i++) await bearerCall(t, killed).expect(401);
      expect(await redis.exists(rlKey(a.id))).toBe(0);

      const fresh = (await agentToken(t, u, a.id)).token;
      for (let i = 0; i < 3; i++) await bearerCall(t, fresh).expect(200);
      expectProblem429(await bearerCall(t, fresh));
      // refused calls of a revoked token past the limit stay 401 and are not recorded as rate limited
      await bearerCall(t, revoked).expect(401);
      expect(await auditRows(t, 'agent.rate_limited', a.id)).toHaveLength(1);
    });

    it('exactly one agent.rate_limited per window when the limit is lowered mid-window (count already past limit + 1)', async () => {
      const { owner, a, token } = await limitedAgent(600);
      for (let i = 0; i < 10; i++) await bearerCall(t, token).expect(200);
      await as(t, owner).patch(agentsUrl(owner, `/${a.id}`), { agent_settings: { rate_limits: { api_calls_per_min: 3 } } }).expect(200);
      await sleep(1100);
      for (let i = 0; i < 4; i++) expectProblem429(await bearerCall(t, token));
      const rows = await auditRows(t, 'agent.rate_limited', a.id);
      expect(rows).toHaveLength(1);
      expect(rows[0].metadata).toMatchObject({ limit_scope: 'api_calls', computed_limit: 3 });
    });

    it('an agent without api_calls_per_min costs no counter; a PATCH that sets it takes effect within the local TTL', async () => {
      const owner = await tenantOnTier(t, 'pro');
      const u = await endUser(t, owner);
      const a = await registerAgent(t, owner);
      const { token } = await agentToken(t, u, a.id);
      for (let i = 0; i < 5; i++) await bearerCall(t, token).expect(200);
      expect(await redis.exists(rlKey(a.id))).toBe(0);

      await as(t, owner).patch(agentsUrl(owner, `/${a.id}`), { agent_settings: { rate_limits: { api_calls_per_min: 2 } } }).expect(200);
      await sleep(1100);
      await bearerCall(t, token).expect(200);
      await bearerCall(t, token).expect(200);
      expectProblem429(await bearerCall(t, token));
    });

    it.each([
      ['raised', { api_calls_per_min: 600 }],
      ['removed', {}],
    ])('a limit %s by PATCH lets a blocked agent through at once, though this process still remembers the old one', async (_n, rateLimits) => {
      const { owner, a, token } = await limitedAgent(2);
      await bearerCall(t, token).expect(200);
      await bearerCall(t, token).expect(200);
      expectProblem429(await bearerCall(t, token));
      await as(t, owner).patch(agentsUrl(owner, `/${a.id}`), { agent_settings: { rate_limits: rateLimits } }).expect(200);
      // within the 1 s memory of the old limit (2): no new block of a full window
      for (let i = 0; i < 4; i++) await bearerCall(t, token).expect(200);
      await sleep(1100);
      for (let i = 0; i < 2; i++) await bearerCall(t, token).expect(200);
      expect(await auditRows(t, 'agent.rate_limited', a.id)).toHaveLength(1);
    });

    it('a block whose window rolled over (the count gone, the limit unchanged) runs its course: no call through, no second event', async () => {
      const { a, token } = await limitedAgent(2);
      await bearerCall(t, token).expect(200);
      await bearerCall(t, token).expect(200);
      expectProblem429(await bearerCall(t, token));
      // the counter's window ends before the block it set (white box: the window's key expires)
      await redis.del(rlKey(a.id));
      await sleep(1100); // past the 1 s memory: the limit is re-read, unchanged
      for (let i = 0; i < 3; i++) expectProblem429(await bearerCall(t, token));
      expect(await auditRows(t, 'agent.rate_limited', a.id)).toHaveLength(1);
    });

    it('an override above the ceiling counts as 600', async () => {
      const owner = await tenantOnTier(t, 'pro');
      const u = await endUser(t, owner);
      const a = await createAgent(t.db, owner.tenantId, { rate_limits: { api_calls_per_min: 100_000 } });
      const { token } = await agentToken(t, u, a.id);
      await bearerCall(t, token).expect(200);
      // white box: the counter of RateLimitService.hit, primed so the next call is the 601st
      await redis.set(rlKey(a.id), '600', 'KEEPTTL');
      expectProblem429(await bearerCall(t, token));
      const [row] = await auditRows(t, 'agent.rate_limited', a.id);
      expect(row.metadata).toMatchObject({ limit_scope: 'api_calls', computed_limit: 600 });
    });
  });

  describe('token_exchange_per_min', () => {
    it('exactly one agent.rate_limited and oauth.token_exchange.rate_limited per window when the limit is lowered mid-window', async () => {
      const owner = await tenantOnTier(t, 'pro');
      const users = await Promise.all([endUser(t, owner), endUser(t, owner)]);
      const a = await registerAgent(t, owner, { scopes: ['openid', 'email'], agent_settings: { rate_limits: { token_exchange_per_min: 600 } } });
      const ex = (i: number) => postToken(t, { id: a.id, secret: a.client_secret }, exchangeBody(users[i % 2].accessToken));
      for (let i = 0; i < 10; i++) expect((await ex(i)).status).toBe(200);
      await as(t, owner).patch(agentsUrl(owner, `/${a.id}`), { agent_settings: { rate_limits: { token_exchange_per_min: 3 } } }).expect(200);
      for (let i = 0; i < 4; i++) {
        const r = await ex(i);
        expect(r.status).toBe(429);
        expect(r.body.error).toBe('slow_down');
      }
      const rows = await auditRows(t, 'agent.rate_limited', a.id);
      expect(rows).toHaveLength(1);
      expect(rows[0].metadata).toMatchObject({ limit_scope: 'agent_client', rate_limit_key: 'token_exchange_per_min', computed_limit: 3 });
      expect(await auditRows(t, 'oauth.token_exchange.rate_limited', a.id)).toHaveLength(1);
    });
  });

  describe('max_concurrent_tokens', () => {
    const subjects = async (owner: Parameters<typeof endUser>[1], n: number): Promise<EndUser[]> => Promise.all(Array.from({ length: n }, () => endUser(t, owner)));
    const exchangeAs = (a: Record<string, any>, subject: string) => postToken(t, { id: a.id, secret: a.client_secret }, exchangeBody(subject));

    it('N parallel exchanges across users issue exactly M; the rest 429 slow_down until kill-tokens frees the slots', async () => {
      const owner = await tenantOnTier(t, 'pro');
      const users = await subjects(owner, 4);
      const a = await registerAgent(t, owner, { scopes: ['openid', 'email'], agent_settings: { max_concurrent_tokens: 3 } });

      const results = await Promise.all(Array.from({ length: 10 }, (_, i) => exchangeAs(a, users[i % 4].accessToken)));
      const ok = results.filter((r) => r.status === 200);
      expect(ok).toHaveLength(3);
      for (const r of results.filter((x) => x.status !== 200)) {
        expect(r.status).toBe(429);
        expect(r.body.error).toBe('slow_down');
        const retry = Number(r.headers['retry-after']);
        expect(retry).toBeGreaterThanOrEqual(1);
        expect(retry).toBeLessThanOrEqual(900);
        expect(r.headers['x-service-docs']).toMatch(/^https?:\/\//);
      }
      // exactly the issued tokens are live, and only they were audited as issued
      const live = await redis.zrange(`agent_tokens:{${a.id}}`, 0, -1);
      expect(live.sort()).toEqual(ok.map((r) => claims(r.body.access_token as string).jti).sort());
      const issued = await t.db.query(`SELECT 1 FROM audit_events WHERE type = 'oauth.token_exchange.issued' AND actor_id = $1`, [a.id]);
      expect(issued).toHaveLength(3);

      const rows = await auditRows(t, 'agent.rate_limited', a.id);
      expect(rows).toHaveLength(1);
      expect(rows[0].metadata).toMatchObject({ limit_scope: 'max_concurrent_tokens', computed_limit: 3 });
      expect(await auditRows(t, 'oauth.token_exchange.rate_limited', a.id)).toHaveLength(1);

      // still refused, not audited again in the window
      expect((await exchangeAs(a, users[0].accessToken)).status).toBe(429);
      expect(await auditRows(t, 'agent.rate_limited', a.id)).toHaveLength(1);

      // kill-tokens: the live tokens are dead, their slots free (a kill refuses tokens of its own second)
      await as(t, owner).post(agentsUrl(owner, `/${a.id}/kill-tokens`)).expect(200);
      await nextSecond();
      const again = await Promise.all(Array.from({ length: 4 }, (_, i) => exchangeAs(a, users[i].accessToken)));
      expect(again.filter((r) => r.status === 200)).toHaveLength(3);
      expect(again.filter((r) => r.status === 429)).toHaveLength(1);
    });

    it('a maximum set on an agent with live tokens counts them (those issued before a kill-tokens are dead)', async () => {
      const owner = await tenantOnTier(t, 'pro');
      const users = await subjects(owner, 2);
      const a = await registerAgent(t, owner, { scopes: ['openid', 'email'] });
      for (let i = 0; i < 2; i++) expect((await exchangeAs(a, users[i].accessToken)).status).toBe(200);
      await as(t, owner).post(agentsUrl(owner, `/${a.id}/kill-tokens`)).expect(200);
      await nextSecond();
      const live: string[] = [];
      for (let i = 0; i < 3; i++) {
        const r = await exchangeAs(a, users[i % 2].accessToken);
        expect(r.status).toBe(200);
        live.push(claims(r.body.access_token as string).jti as string);
      }
      // an expired token is not live: its row is back-dated past any agent token's lifetime
      const old = await exchangeAs(a, users[0].accessToken);
      expect(old.status).toBe(200);
      const oldJti = claims(old.body.access_token as string).jti as string;
      await t.db.query(`UPDATE agent_actions SET created_at = created_at - interval '1000 seconds' WHERE jti = $1`, [oldJti]);

      await as(t, owner).patch(agentsUrl(owner, `/${a.id}`), { agent_settings: { max_concurrent_tokens: 4 } }).expect(200);
      const seeded = await redis.zrange(`agent_tokens:{${a.id}}`, 0, -1, 'WITHSCORES');
      const members = seeded.filter((_, i) => i % 2 === 0);
      expect(members.sort()).toEqual([...live].sort());
      // the score is the token's exp (from the issued audit row)
      const exps = await Promise.all(live.map((j) => redis.zscore(`agent_tokens:{${a.id}}`, j)));
      for (const e of exps) expect(Number(e)).toBeGreaterThan(Date.now() / 1000 + 200);

      expect((await exchangeAs(a, users[0].accessToken)).status).toBe(200);
      const refused = await exchangeAs(a, users[1].accessToken);
      expect(refused.status).toBe(429);
      expect(refused.body.error).toBe('slow_down');
    });

    it('a Redis flush forgets no live token: the set is seeded again from PostgreSQL before the next slot is taken (tokens killed before stay dead)', async () => {
      const owner = await tenantOnTier(t, 'pro');
      const users = await subjects(owner, 3);
      const a = await registerAgent(t, owner, { scopes: ['openid', 'email'], agent_settings: { max_concurrent_tokens: 3 } });
      for (let i = 0; i < 2; i++) expect((await exchangeAs(a, users[i].accessToken)).status).toBe(200);
      await as(t, owner).post(agentsUrl(owner, `/${a.id}/kill-tokens`)).expect(200);
      await nextSecond();
      const live: string[] = [];
      for (let i = 0; i < 2; i++) {
        const r = await exchangeAs(a, users[i].accessToken);
        expect(r.status).toBe(200);
        live.push(claims(r.body.access_token as string).jti as string);
      }
      const raw = rawRedis();
      try {
        expect(await flushTestPrefix(raw)).toBeGreaterThan(0);
      } finally {
        await raw.quit();
      }
      expect(await redis.exists(`agent_tokens:{${a.id}}`)).toBe(0);
      // two live tokens survive the flush in PostgreSQL: one slot of three is left, not three
      const third = await exchangeAs(a, users[2].accessToken);
      expect(third.status).toBe(200);
      live.push(claims(third.body.access_token as string).jti as string);
      const refused = await exchangeAs(a, users[2].accessToken);
      expect([refused.status, refused.body.error]).toEqual([429, 'slow_down']);
      expect((await redis.zrange(`agent_tokens:{${a.id}}`, 0, -1)).sort()).toEqual([...live].sort());
      // the seed is remembered for the longest a token lives, then read again
      const ttl = await redis.ttl(`agent_tokens:{${a.id}}:seeded`);
      expect(ttl).toBeGreaterThan(800);
      expect(ttl).toBeLessThanOrEqual(900);
    });

    it('a PATCH setting the maximum whose seed fails leaves no seeded marker: the next exchange seeds, and the tokens issued while it was unset count', async () => {
      const owner = await tenantOnTier(t, 'pro');
      const users = await subjects(owner, 4);
      const a = await registerAgent(t, owner, { scopes: ['openid', 'email'], agent_settings: { max_concurrent_tokens: 2 } });
      // the first exchange seeds (an empty set) and sets the marker
      expect((await exchangeAs(a, users[0].accessToken)).status).toBe(200);
      expect(await redis.exists(`agent_tokens:{${a.id}}:seeded`)).toBe(1);
      // the maximum unset: the tokens issued meanwhile are not counted (no Redis work)
      await as(t, owner).patch(agentsUrl(owner, `/${a.id}`), { agent_settings: { max_concurrent_tokens: null } }).expect(200);
      await sleep(1100);
      for (let i = 1; i <= 2; i++) expect((await exchangeAs(a, users[i].accessToken)).status).toBe(200);
      // set again; its seed fails (PostgreSQL refuses the seed's read once): the PATCH answers 200 all the same
      const db = t.app.get(Db);
      const query = db.query.bind(db);
      const spy = jest.spyOn(db, 'query').mockImplementation(((sql: string, params?: unknown[], name?: string) =>
        name === 'agent_live_tokens_seed' ? Promise.reject(new Error('injected: seed read failed')) : query(sql, params, name)) as never);
      try {
        await as(t, owner).patch(agentsUrl(owner, `/${a.id}`), { agent_settings: { max_concurrent_tokens: 2 } }).expect(200);
      } finally {
        spy.mockRestore();
      }
      expect(await redis.exists(`agent_tokens:{${a.id}}:seeded`)).toBe(0);
      await sleep(1100);
      // three tokens live against a maximum of 2: refused
      const next = await exchangeAs(a, users[3].accessToken);
      expect([next.status, next.body.error]).toEqual([429, 'slow_down']);
      expect(await redis.zcard(`agent_tokens:{${a.id}}`)).toBe(3);
    });

    /**
     * A new agent (maximum 2) with two live tokens, after `before` (e.g. an earlier kill), and its
     * seeded marker gone (its 900 s over, or a flush): the next exchange seeds.
     */
    async function twoLiveUnseeded(before?: (owner: Parameters<typeof endUser>[1], a: Record<string, any>) => Promise<void>) {
      const owner = await tenantOnTier(t, 'pro');
      const users = await subjects(owner, 4);
      const a = await registerAgent(t, owner, { scopes: ['openid', 'email'], agent_settings: { max_concurrent_tokens: 2 } });
      await before?.(owner, a);
      const live: string[] = [];
      for (let i = 0; i < 2; i++) {
        const r = await exchangeAs(a, users[i].accessToken);
        expect(r.status).toBe(200);
        live.push(claims(r.body.access_token as string).jti as string);
      }
      await redis.del(`agent_tokens:{${a.id}}:seeded`);
      return { owner, users, a, live };
    }

    /**
     * Runs `exchange` with its seed's first PostgreSQL answer held until `during` has run (read
     * before it, written after it): the exchange's answer, and how many seed reads were made.
     */
    async function withSeedReadHeld(exchange: () => Promise<Res>, during: () => Promise<unknown>): Promise<{ res: Res; seedReads: number }> {
      const db = t.app.get(Db);
      const query = db.query.bind(db);
      let readDone!: () => void;
      const read = new Promise<void>((r) => (readDone = r));
      let letGo!: () => void;
      const go = new Promise<void>((r) => (letGo = r));
      let seedReads = 0;
      const spy = jest.spyOn(db, 'query').mockImplementation((async (sql: string, params?: unknown[], name?: string) => {
        const rows = await query(sql, params, name);
        if (name === 'agent_live_tokens_seed' && seedReads++ === 0) {
          readDone();
          await go;
        }
        return rows;
      }) as never);
      try {
        const exchanging = exchange();
        await Promise.race([read, exchanging.then((r) => Promise.reject(new Error(`the exchange ended before its seed read: ${r.status}`)))]);
        await during();
        letGo();
        return { res: await exchanging, seedReads };
      } finally {
        spy.mockRestore();
      }
    }

    it('a seed that read PostgreSQL before a kill-tokens and writes after the kill cleared the set brings no killed token back', async () => {
      const { owner, users, a, live: killed } = await twoLiveUnseeded();
      const kill = () => as(t, owner).post(agentsUrl(owner, `/${a.id}/kill-tokens`)).expect(200);
      const { seedReads } = await withSeedReadHeld(() => exchangeAs(a, users[2].accessToken), kill);
      // the stale read was not written: the seed read again, past the kill
      expect(seedReads).toBe(2);
      const set = await redis.zrange(`agent_tokens:{${a.id}}`, 0, -1);
      for (const jti of killed) expect(set).not.toContain(jti);
      await nextSecond();
      expect((await exchangeAs(a, users[3].accessToken)).status).toBe(200);
    });

    /** A new agent with `n` live token rows in PostgreSQL (one through the service, the rest copied from it) and no seed yet. */
    async function agentWithLive(n: number, max: number) {
      const owner = await tenantOnTier(t, 'pro');
      const users = await subjects(owner, 2);
      const a = await registerAgent(t, owner, { scopes: ['openid', 'email'], agent_settings: { max_concurrent_tokens: max } });
      const id = await insertAction(t, { tenantId: owner.tenantId, agentId: a.id });
      await t.db.query(
        `INSERT INTO agent_actions (tenant_id, agent_client_id, action, actor_user_id, resource, method_or_event, jti, scope_used, ip_hash_prefix, user_agent_hash_prefix)
         SELECT tenant_id, agent_client_id, action, actor_user_id, resource, method_or_event, 'bulk-' || g, scope_used, ip_hash_prefix, user_agent_hash_prefix
           FROM agent_actions, generate_series(2, $2::int) g WHERE id = $1`,
        [id, n],
      );
      await redis.del(`agent_tokens:{${a.id}}:seeded`, `agent_tokens:{${a.id}}`);
      return { users, a };
    }

    it('a seed of many live tokens is written in parts: 130,001 live against a maximum of 100000 are all counted (429), not a 503 (one script call overflowed Node\'s argument limit, then Math.max did)', async () => {
      const { users, a } = await agentWithLive(130001, 100000);
      const r = await exchangeAs(a, users[0].accessToken);
      expect([r.status, r.body.error]).toEqual([429, 'slow_down']);
      expect(await redis.zcard(`agent_tokens:{${a.id}}`)).toBe(130001);
      expect(await redis.exists(`agent_tokens:{${a.id}}:seeded`)).toBe(1);
    });

    it('a Redis flush between two parts of a seed is seen by the parts after it: the seed reads again and counts every live token', async () => {
      const { users, a } = await agentWithLive(5001, 5001);
      // the flush comes right before the seed's second part (the service's script call, wrapped)
      const slots = t.app.get(AgentTokenSlotsService) as unknown as { seedCmd: (...args: unknown[]) => Promise<number> };
      const seedCmd = slots.seedCmd;
      let calls = 0;
      const raw = rawRedis();
      slots.seedCmd = async (...args: unknown[]) => {
        if (++calls === 2) await flushTestPrefix(raw);
        return seedCmd(...args);
      };
      let inFlight: Res;
      try {
        inFlight = await exchangeAs(a, users[0].accessToken);
      } finally {
        slots.seedCmd = seedCmd;
        await raw.quit();
      }
      expect(calls).toBeGreaterThan(2);
      // 5,001 live against a maximum of 5,001: refused, and still after
      expect([inFlight.status, await redis.zcard(`agent_tokens:{${a.id}}`)]).toEqual([429, 5001]);
      expect((await exchangeAs(a, users[1].accessToken)).status).toBe(429);
    });

    it('a Redis flush during a seed, then a kill-tokens: the generation the kill sets never repeats one a seed read, so no killed token comes back; it expires', async () => {
      const { owner, users, a, live: killed } = await twoLiveUnseeded(async (o, agent) => {
        // an earlier kill: a generation is set, with an expiry
        await as(t, o).post(agentsUrl(o, `/${agent.id}/kill-tokens`)).expect(200);
        const ttl = await redis.ttl(`agent_tokens:{${agent.id}}:gen`);
        expect(ttl).toBeGreaterThan(900);
        expect(ttl).toBeLessThanOrEqual(1800);
        await nextSecond();
      });
      const raw = rawRedis();
      try {
        const { res } = await withSeedReadHeld(
          () => exchangeAs(a, users[2].accessToken),
          async () => {
            await flushTestPrefix(raw);
            await as(t, owner).post(agentsUrl(owner, `/${a.id}/kill-tokens`)).expect(200);
          },
        );
        expect(res.status).toBe(200);
      } finally {
        await raw.quit();
      }
      const set = await redis.zrange(`agent_tokens:{${a.id}}`, 0, -1);
      for (const jti of killed) expect(set).not.toContain(jti);
      await nextSecond();
      expect((await exchangeAs(a, users[3].accessToken)).status).toBe(200);
    });

    it('without max_concurrent_tokens nothing is counted', async () => {
      const owner = await tenantOnTier(t, 'pro');
      const users = await subjects(owner, 2);
      const a = await registerAgent(t, owner, { scopes: ['openid', 'email'] });
      const results = await Promise.all(Array.from({ length: 6 }, (_, i) => exchangeAs(a, users[i % 2].accessToken)));
      expect(results.map((r) => r.status)).toEqual(Array(6).fill(200));
      expect(await redis.exists(`agent_tokens:{${a.id}}`)).toBe(0);
    });

    it('validates the field: a positive integer up to 100000, null clears it (PATCH)', async () => {
      const owner = await tenantOnTier(t, 'pro');
      for (const bad of [0, -1, 1.5, '3', 100_001]) {
        const res = await as(t, owner).post(agentsUrl(owner), { name: 'x', agent_settings: { max_concurrent_tokens: bad } });
        expect(res.status).toBe(400);
      }
      const a = await registerAgent(t, owner, { agent_settings: { max_concurrent_tokens: 1 } });
      const res = await as(t, owner).patch(agentsUrl(owner, `/${a.id}`), { agent_settings: { max_concurrent_tokens: null } }).expect(200);
      expect(res.body.agent_settings.max_concurrent_tokens).toBeNull();
    });
  });
});
