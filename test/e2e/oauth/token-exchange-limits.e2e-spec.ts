import Redis from 'ioredis';
import { hashPrefix } from '../../../src/shared/crypto/tokens';
import { REDIS } from '../../../src/shared/redis/redis.module';
import { createAgent } from '../../factories/agent.factory';
import { createTenant, TenantFixture } from '../../factories/tenant.factory';
import { createTestApp, TestApp } from '../../setup/app';
import { createApiKey } from '../../factories/dashboard.factory';
import { agentsUrl, as, registerAgent, tenantOnTier } from '../agents/agents.helpers';
import { redisWrites } from '../../setup/redis-writes';
import { auditRows, claims, exchangeBody, login, postToken, registerUser, RegisteredUser } from './oauth-helpers';

/** spec 8: 60 exchanges per minute per agent client (override up to 600), 10 per minute per subject jti. */
describe('POST /oauth/token: rate limits (spec 6, 8)', () => {
  let t: TestApp;
  let second: TestApp;
  let tenant: TenantFixture;
  let user: RegisteredUser;

  beforeAll(async () => {
    t = await createTestApp();
    second = await createTestApp();
    tenant = await createTenant(t.db, { tier: 'pro' });
    user = await registerUser(t, tenant);
  });
  afterAll(async () => {
    await t.close();
    await second.close();
  });

  const subjects = async (n: number) => Promise.all(Array.from({ length: n }, async () => (await login(t, tenant, user.email)).access_token));

  function expect429(res: { status: number; body: Record<string, unknown>; headers: Record<string, string> }) {
    expect(res.status).toBe(429);
    expect(res.body.error).toBe('slow_down');
    const retry = Number(res.headers['retry-after']);
    expect(Number.isInteger(retry) && retry >= 1 && retry <= 60).toBe(true);
    expect(res.headers['x-service-docs']).toMatch(/^https?:\/\//);
    expect(res.headers['cache-control']).toBe('no-store');
    expect(res.body).not.toHaveProperty('access_token');
  }

  it('the 61st exchange of an agent client in a minute is 429 slow_down; audited once with the limit scope and computed limit', async () => {
    const agent = await createAgent(t.db, tenant.id);
    const tokens = await subjects(7);
    for (let i = 0; i < 60; i++) await postToken(t, agent, exchangeBody(tokens[i % 7])).expect(200);
    expect429(await postToken(t, agent, exchangeBody(tokens[6])));
    expect429(await postToken(t, agent, exchangeBody(tokens[5])));
    const limited = await auditRows(t, 'oauth.token_exchange.rate_limited', agent.id);
    const agentLimited = await auditRows(t, 'agent.rate_limited', agent.id);
    expect(limited).toHaveLength(1);
    expect(agentLimited).toHaveLength(1);
    for (const row of [limited[0], agentLimited[0]]) {
      expect(row.metadata).toMatchObject({ agent_client_id: agent.id, limit_scope: 'agent_client', rate_limit_key: 'token_exchange_per_min', computed_limit: 60, window_seconds: 60 });
      // spec 6: the refused request's subject token, although the limit is checked before it is verified
      expect(row.metadata.subject_token_jti_hash_prefix).toBe(hashPrefix(claims(tokens[6]).jti as string));
    }
    const webhooks = await t.db.query<{ topic: string; payload: Record<string, unknown> }>(
      `SELECT topic, payload FROM outbox WHERE event_type IN ('agent.rate_limited', 'oauth.token_exchange.rate_limited') AND payload->>'agent_client_id' = $1`,
      [agent.id],
    );
    expect(webhooks).toHaveLength(2);
    // spec 6: webhook payloads carry agent_client_id and subject_token_jti_hash_prefix too
    for (const webhook of webhooks) {
      expect(webhook).toMatchObject({
        topic: 'webhook',
        payload: { agent_client_id: agent.id, limit_scope: 'agent_client', computed_limit: 60, subject_token_jti_hash_prefix: hashPrefix(claims(tokens[6]).jti as string) },
      });
    }
    // other agents are not affected
    const other = await createAgent(t.db, tenant.id);
    await postToken(t, other, exchangeBody(tokens[0])).expect(200);
  });

  it("honours the agent's token_exchange_per_min override, across two API instances", async () => {
    const agent = await createAgent(t.db, tenant.id, { rate_limits: { token_exchange_per_min: 3 } });
    const [st] = await subjects(1);
    await postToken(t, agent, exchangeBody(st)).expect(200);
    await postToken(second, agent, exchangeBody(st)).expect(200);
    await postToken(t, agent, exchangeBody(st)).expect(200);
    expect429(await postToken(second, agent, exchangeBody(st)));
    const [row] = await auditRows(t, 'agent.rate_limited', agent.id);
    expect(row.metadata).toMatchObject({ limit_scope: 'agent_client', computed_limit: 3 });
  });

  it('raising token_exchange_per_min (PATCH) lifts the block the old limit set at once; lowering it does not', async () => {
    const owner = await tenantOnTier(t, 'pro');
    const key = await createApiKey(t, owner);
    const own = { id: owner.tenantId, slug: owner.slug, apiKey: key.key, apiKeyId: key.id };
    const u = await registerUser(t, own);
    const a = await registerAgent(t, owner, { agent_settings: { rate_limits: { token_exchange_per_min: 2 } } });
    const agent = { id: a.id as string, secret: a.client_secret as string };
    const { access_token: st } = await login(t, own, u.email);
    await postToken(t, agent, exchangeBody(st)).expect(200);
    await postToken(second, agent, exchangeBody(st)).expect(200);
    expect429(await postToken(t, agent, exchangeBody(st)));
    const patch = (perMin: number) => as(t, owner).patch(agentsUrl(owner, `/${a.id}`), { agent_settings: { rate_limits: { token_exchange_per_min: perMin } } }).expect(200);
    await patch(1);
    expect429(await postToken(second, agent, exchangeBody(st)));
    // raised: the next request is judged against 10, on either instance; the window's count goes on
    await patch(10);
    await postToken(second, agent, exchangeBody(st)).expect(200);
    await postToken(t, agent, exchangeBody(st)).expect(200);
  });

  it('per-client rate_limited events carry subject_token_jti_hash_prefix null when the request has no readable subject token', async () => {
    for (const subjectToken of [undefined, 'not-a-jwt']) {
      const agent = await createAgent(t.db, tenant.id, { rate_limits: { token_exchange_per_min: 1 } });
      const [st] = await subjects(1);
      await postToken(t, agent, exchangeBody(st)).expect(200);
      const form = exchangeBody('');
      if (subjectToken) form.subject_token = subjectToken;
      expect429(await postToken(t, agent, form));
      for (const type of ['oauth.token_exchange.rate_limited', 'agent.rate_limited']) {
        const [row] = await auditRows(t, type, agent.id);
        expect(row.metadata).toMatchObject({ limit_scope: 'agent_client', computed_limit: 1 });
        expect(row.metadata).toHaveProperty('subject_token_jti_hash_prefix', null);
      }
    }
  });

  it("rate_limited events carry the requested scope as the exchange reads it (without repeats), and none when it is malformed or too long", async () => {
    const cases: [string, string | null][] = [
      ['openid email openid', 'openid email'],
      ['openid "quoted"', null],
      [Array.from({ length: 101 }, (_, i) => `s${i}`).join(' '), null],
    ];
    for (const [scope, recorded] of cases) {
      const agent = await createAgent(t.db, tenant.id, { rate_limits: { token_exchange_per_min: 1 } });
      const [st] = await subjects(1);
      await postToken(t, agent, exchangeBody(st)).expect(200);
      expect429(await postToken(t, agent, exchangeBody(st, { scope })));
      const [row] = await auditRows(t, 'oauth.token_exchange.rate_limited', agent.id);
      expect(row.metadata).toHaveProperty('requested_scope', recorded);
    }
  });

  it('an override above the ceiling counts as 600', async () => {
    const agent = await createAgent(t.db, tenant.id, { rate_limits: { token_exchange_per_min: 100_000 } });
    // the limiter's counter for this agent is primed to the ceiling (white box: the key of
    // RateLimitService.hit), so the next request is the 601st of the minute
    await t.app.get<Redis>(REDIS).set(`{rl:agent:${agent.id}:token_exchange_client}:hits`, '600', 'EX', 60);
    const [st] = await subjects(1);
    expect429(await postToken(t, agent, exchangeBody(st)));
    const [row] = await auditRows(t, 'oauth.token_exchange.rate_limited', agent.id);
    expect(row.metadata).toMatchObject({ computed_limit: 600, subject_token_jti_hash_prefix: hashPrefix(claims(st).jti as string) });
  });

  it('a request the per-client limit refuses does not count against its subject token', async () => {
    const tight = await createAgent(t.db, tenant.id, { rate_limits: { token_exchange_per_min: 2 } });
    const [token] = await subjects(1);
    for (let i = 0; i < 2; i++) await postToken(t, tight, exchangeBody(token)).expect(200);
    for (let i = 0; i < 3; i++) expect429(await postToken(t, tight, exchangeBody(token)));
    // the token was exchanged twice: 8 more of its 10 per minute are left, for any other agent
    const other = await createAgent(t.db, tenant.id);
    for (let i = 0; i < 8; i++) await postToken(t, other, exchangeBody(token)).expect(200);
    expect429(await postToken(t, other, exchangeBody(token)));
  });

  it('one Redis round trip counts both limits and reads the revocation state and the denylist', async () => {
    const agent = await createAgent(t.db, tenant.id);
    const [token] = await subjects(1);
    await postToken(t, agent, exchangeBody(token)).expect(200); // the agent client is cached now
    const redis = t.app.get<Redis>(REDIS);
    const writes = await redisWrites(redis, () => postToken(t, agent, exchangeBody(token)).expect(200));
    const prefix = redis.options.keyPrefix ?? '';
    const keysOf = (cmds: string[][]) => cmds.flat();
    const limits = writes.filter((cmds) => keysOf(cmds).some((a) => a.includes(`rl:agent:${agent.id}`)));
    expect(limits).toHaveLength(1);
    const together = keysOf(limits[0]);
    expect(together.some((a) => a.includes(`rl:jti:${claims(token).jti as string}`))).toBe(true);
    expect(together).toContain(`${prefix}denylist:agent:${agent.id}`);
    expect(together.some((a) => a.startsWith(`${prefix}revoked:sid:`))).toBe(true);
    // and before it only the agent client's cache read: two round trips before PostgreSQL
    expect(writes.indexOf(limits[0])).toBe(1);
    expect(keysOf(writes[0])).toContain(`${prefix}agentclient:${agent.id}`);
  });

  it('the 11th exchange of one subject token in a minute is 429, whichever agent asks; audited with the jti hash prefix', async () => {
    const a = await createAgent(t.db, tenant.id, { rate_limits: { token_exchange_per_min: 600 } });
    const b = await createAgent(t.db, tenant.id, { rate_limits: { token_exchange_per_min: 600 } });
    const [st, fresh] = await subjects(2);
    for (let i = 0; i < 10; i++) await postToken(t, a, exchangeBody(st)).expect(200);
    expect429(await postToken(t, a, exchangeBody(st)));
    expect429(await postToken(t, b, exchangeBody(st)));
    const [row] = await auditRows(t, 'oauth.token_exchange.rate_limited', a.id);
    expect(row.metadata).toMatchObject({
      agent_client_id: a.id,
      limit_scope: 'subject_token_jti',
      computed_limit: 10,
      subject_token_jti_hash_prefix: hashPrefix(claims(st).jti as string),
    });
    expect(JSON.stringify(row.metadata)).not.toContain(claims(st).jti as string);
    // each agent the shared limit refuses records its own events, once per window (spec 6:
    // webhooks are filtered by agent_client_id, so a subscriber of b's hears of b's refusal)
    expect429(await postToken(t, b, exchangeBody(st)));
    expect429(await postToken(t, a, exchangeBody(st)));
    for (const agent of [a, b]) {
      const rows = await auditRows(t, 'oauth.token_exchange.rate_limited', agent.id);
      const webhooks = await t.db.query(`SELECT 1 FROM outbox WHERE event_type = 'oauth.token_exchange.rate_limited' AND payload->>'agent_client_id' = $1`, [agent.id]);
      expect([agent.id, rows.length, webhooks.length]).toEqual([agent.id, 1, 1]);
      expect(rows[0].metadata).toMatchObject({ limit_scope: 'subject_token_jti', subject_token_jti_hash_prefix: hashPrefix(claims(st).jti as string) });
    }
    // another subject token of the same user still works
    await postToken(t, a, exchangeBody(fresh)).expect(200);
  });

  it('holds under parallel requests: 15 concurrent exchanges of one subject token, exactly 10 succeed', async () => {
    const agent = await createAgent(t.db, tenant.id, { rate_limits: { token_exchange_per_min: 600 } });
    const [st] = await subjects(1);
    const results = await Promise.all(Array.from({ length: 15 }, (_, i) => postToken(i % 2 ? second : t, agent, exchangeBody(st))));
    expect(results.filter((r) => r.status === 200)).toHaveLength(10);
    for (const r of results.filter((x) => x.status !== 200)) expect429(r);
    const issued = await t.db.query(`SELECT 1 FROM audit_events WHERE type = 'oauth.token_exchange.issued' AND actor_id = $1`, [agent.id]);
    expect(issued).toHaveLength(10);
  });
});
