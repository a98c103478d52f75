import Redis from 'ioredis';
import { AgentDenylistService, DENYLIST_MERGE_SCRIPT, denylistKey } from '../../../src/modules/agents/agent-denylist.service';
import { REDIS } from '../../../src/shared/redis/redis.module';
import { createTestApp, TestApp } from '../../setup/app';
import {
  addMember,
  agentToken,
  agentsUrl,
  as,
  bearerCall,
  endUser,
  EndUser,
  flushTestPrefix,
  nextSecond,
  rawRedis,
  registerAgent,
  Session,
  tenantOnTier,
} from './agents.helpers';

const PREFIX = process.env.REDIS_KEY_PREFIX as string;
const AGENT_REVOKED = 'Bearer error="invalid_token", error_description="agent_revoked"';

describe('agent revocation, denylist and kill-tokens (spec 3.2, 5 rule 1, 6)', () => {
  let t: TestApp;
  let owner: Session;
  let owner2: Session;
  let member: Session;
  let user: EndUser;
  let redis: Redis;
  beforeAll(async () => {
    t = await createTestApp();
    owner = await tenantOnTier(t, 'pro');
    owner2 = await addMember(t, owner, 'owner');
    member = await addMember(t, owner, 'member');
    user = await endUser(t, owner);
    redis = rawRedis();
  });
  afterAll(async () => {
    await redis.quit();
    await t.close();
  });

  const count = async (sql: string, params: unknown[]) => (await t.db.query(sql, params)).length;

  describe('spec 3.2 row 1: active -> revoked', () => {
    it('sets revoked_at, adds the denylist entry for agent_token_max_ttl_sec, emits agent.revoked (high) audit + webhook, emails every owner', async () => {
      const a = await registerAgent(t, owner, { agent_token_max_ttl_sec: 600 });
      expect((await as(t, member).delete(agentsUrl(owner, `/${a.id}`)).expect(403)).body.code).toBe('auth/forbidden');
      const res = await as(t, owner).delete(agentsUrl(owner, `/${a.id}`)).expect(200);
      expect(res.body).toEqual({ id: a.id, name: a.name, revoked_at: expect.any(String), agent_metadata_version: 1 });
      expect(Date.now() - Date.parse(res.body.revoked_at)).toBeLessThan(60_000);

      const [entry] = await t.db.query<{ reason: string; ttl: number }>(
        `SELECT reason, extract(epoch FROM expires_at - not_before)::int AS ttl FROM agent_denylist WHERE agent_client_id = $1`,
        [a.id],
      );
      expect(entry).toEqual({ reason: 'agent_revoked', ttl: 600 });

      const audits = await t.db.query<{ severity: string; actor_id: string; metadata: Record<string, unknown> }>(
        `SELECT severity, actor_id, metadata FROM audit_events WHERE type = 'agent.revoked' AND target_id = $1`,
        [a.id],
      );
      expect(audits).toHaveLength(1);
      expect(audits[0]).toMatchObject({ severity: 'high', actor_id: owner.userId, metadata: { agent_client_id: a.id } });
      expect(JSON.stringify(audits)).not.toContain(a.client_secret);

      const hooks = await t.db.query<{ payload: Record<string, unknown> }>(`SELECT payload FROM outbox WHERE topic = 'webhook' AND event_type = 'agent.revoked' AND payload->>'agent_client_id' = $1`, [a.id]);
      expect(hooks).toHaveLength(1);
      expect(hooks[0].payload).toMatchObject({ agent_client_id: a.id, revoked_at: res.body.revoked_at });

      const mails = await t.db.query<{ payload: { to: string; template: string; data: Record<string, unknown> } }>(
        `SELECT payload FROM outbox WHERE topic = 'email' AND payload->>'template' = 'agent_revoked' AND payload->'data'->>'agent_id' = $1`,
        [a.id],
      );
      expect(mails.map((m) => m.payload.to).sort()).toEqual([owner.email, owner2.email].sort());
      expect(mails.map((m) => m.payload.to)).not.toContain(member.email);

      const got = await as(t, owner).get(agentsUrl(owner, `/${a.id}`)).expect(200);
      expect(got.body.revoked_at).toBe(res.body.revoked_at);
    });
  });

  describe('spec 3.2 row 2: revoked -> DELETE again', () => {
    it('answers 200 with the existing revoked_at and emits nothing more', async () => {
      const a = await registerAgent(t, owner);
      const first = await as(t, owner).delete(agentsUrl(owner, `/${a.id}`)).expect(200);
      const again = await as(t, owner2).delete(agentsUrl(owner, `/${a.id}`)).expect(200);
      expect(again.body).toEqual(first.body);
      expect(await count(`SELECT 1 FROM audit_events WHERE type = 'agent.revoked' AND target_id = $1`, [a.id])).toBe(1);
      expect(await count(`SELECT 1 FROM outbox WHERE event_type = 'agent.revoked' AND payload->>'agent_client_id' = $1`, [a.id])).toBe(1);
      expect(await count(`SELECT 1 FROM outbox WHERE topic = 'email' AND payload->'data'->>'agent_id' = $1`, [a.id])).toBe(2);
      expect(await count(`SELECT 1 FROM agent_denylist WHERE agent_client_id = $1`, [a.id])).toBe(1);
    });

    it('10 parallel DELETEs: one revoked_at, one audit event, one webhook row, one email per owner', async () => {
      const a = await registerAgent(t, owner);
      const sessions = [owner, owner2];
      const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => as(t, sessions[i % 2]).delete(agentsUrl(owner, `/${a.id}`))));
      expect(answers.map((r) => r.status)).toEqual(Array(10).fill(200));
      expect(new Set(answers.map((r) => r.body.revoked_at)).size).toBe(1);
      expect(await count(`SELECT 1 FROM audit_events WHERE type = 'agent.revoked' AND target_id = $1`, [a.id])).toBe(1);
      expect(await count(`SELECT 1 FROM outbox WHERE topic = 'webhook' AND event_type = 'agent.revoked' AND payload->>'agent_client_id' = $1`, [a.id])).toBe(1);
      const mails = await t.db.query<{ to: string }>(`SELECT payload->>'to' AS to FROM outbox WHERE topic = 'email' AND payload->'data'->>'agent_id' = $1`, [a.id]);
      expect(mails.map((m) => m.to).sort()).toEqual([owner.email, owner2.email].sort());
      expect(await count(`SELECT 1 FROM agent_denylist WHERE agent_client_id = $1`, [a.id])).toBe(1);
    });
  });

  describe('spec 3.2 row 3: revoked -> PATCH or rotate-secret', () => {
    it('answers 409 agent/already_revoked and changes nothing; disable and kill-tokens too', async () => {
      const a = await registerAgent(t, owner);
      await as(t, owner).delete(agentsUrl(owner, `/${a.id}`)).expect(200);
      const patch = await as(t, owner).patch(agentsUrl(owner, `/${a.id}`), { name: 'back' }).expect(409);
      expect(patch.body).toMatchObject({ status: 409, code: 'agent/already_revoked' });
      // whatever the PATCH carries: a grant type outside the allowlist or redirect URIs are no 422 here
      for (const body of [{ grant_types: ['password'] }, { redirect_uris: ['https://x.example/cb'] }]) {
        expect((await as(t, owner).patch(agentsUrl(owner, `/${a.id}`), body).expect(409)).body.code).toBe('agent/already_revoked');
      }
      // another tenant's agent: 404 for those too
      const stranger = await tenantOnTier(t, 'pro');
      for (const body of [{ name: 'x' }, { grant_types: ['password'] }]) {
        expect((await as(t, stranger).patch(agentsUrl(stranger, `/${a.id}`), body).expect(404)).body.code).toBe('agent/not_found');
      }
      expect((await as(t, owner).post(agentsUrl(owner, `/${a.id}/rotate-secret`)).expect(409)).body.code).toBe('agent/already_revoked');
      expect((await as(t, owner).post(agentsUrl(owner, `/${a.id}/disable`)).expect(409)).body.code).toBe('agent/already_revoked');
      expect((await as(t, owner).post(agentsUrl(owner, `/${a.id}/kill-tokens`)).expect(409)).body.code).toBe('agent/already_revoked');
      const [row] = await t.db.query<{ name: string; secret_hash: string; agent_metadata_version: number }>(`SELECT name, agent_metadata_version FROM agent_clients WHERE id = $1`, [a.id]);
      expect(row).toEqual({ name: a.name, agent_metadata_version: 1 });
    });
  });

  describe('spec 5 rule 1: the bearer guard consults the denylist', () => {
    it('accepts an agent token of an active agent and refuses it with 401 agent_revoked once the agent is revoked', async () => {
      const a = await registerAgent(t, owner);
      const { token } = await agentToken(t, user, a.id);
      const ok = await bearerCall(t, token).expect(200);
      expect(ok.body.id).toBe(user.userId);
      // the bearer check above cached "no entry" for this agent: the revoke must override it at once
      expect(await t.app.get<Redis>(REDIS).get(denylistKey(a.id))).toBe('0');
      await as(t, owner).delete(agentsUrl(owner, `/${a.id}`)).expect(200);
      const res = await bearerCall(t, token).expect(401);
      expect(res.headers['www-authenticate']).toBe(AGENT_REVOKED);
      // the user's own token is unaffected
      await bearerCall(t, user.accessToken).expect(200);
    });

    it('logout with an agent token is refused (403 auth/forbidden: it has no session), not a 204 that ends nothing', async () => {
      const a = await registerAgent(t, owner);
      const { token } = await agentToken(t, user, a.id);
      const res = await t.http().post('/v1/auth/logout').set('Authorization', `Bearer ${token}`).expect(403);
      expect(res.body.code).toBe('auth/forbidden');
      expect(res.body.detail).toMatch(/oauth\/revoke/);
      // the user's session is untouched
      await bearerCall(t, user.accessToken).expect(200);
    });

    it('still answers agent_revoked after this test file’s Redis keys were deleted (PostgreSQL is the source of truth)', async () => {
      const a = await registerAgent(t, owner, { agent_token_max_ttl_sec: 300 });
      const { token } = await agentToken(t, user, a.id);
      await as(t, owner).delete(agentsUrl(owner, `/${a.id}`)).expect(200);
      expect(await redis.get(`${PREFIX}${denylistKey(a.id)}`)).toBe('all');
      expect(await flushTestPrefix(redis)).toBeGreaterThan(0);
      expect(await redis.get(`${PREFIX}${denylistKey(a.id)}`)).toBeNull();
      const res = await bearerCall(t, token).expect(401);
      expect(res.headers['www-authenticate']).toBe(AGENT_REVOKED);
      // the miss was answered from PostgreSQL and cached again for the entry's remaining validity
      expect(await redis.get(`${PREFIX}${denylistKey(a.id)}`)).toBe('all');
      const ttl = await redis.ttl(`${PREFIX}${denylistKey(a.id)}`);
      expect(ttl).toBeGreaterThan(250);
      expect(ttl).toBeLessThanOrEqual(300);
      // and again after a second flush, through the exported service
      await flushTestPrefix(redis);
      await expect(t.app.get(AgentDenylistService).isDenied(a.id, Math.floor(Date.now() / 1000))).resolves.toBe(true);
    });

    it('a slow writer holding an older reading never weakens the cached state (revoke > kill > none)', async () => {
      const a = await registerAgent(t, owner);
      const { token } = await agentToken(t, user, a.id);
      const appRedis = t.app.get<Redis>(REDIS);
      const key = denylistKey(a.id);
      const merge = (state: string, ttl = 30) => appRedis.eval(DENYLIST_MERGE_SCRIPT, 1, key, state, String(ttl));
      await as(t, owner).post(agentsUrl(owner, `/${a.id}/kill-tokens`)).expect(200);
      const killed = await appRedis.get(key);
      expect(Number(killed)).toBeGreaterThan(Date.now() / 1000 - 60);
      // a reader that read PostgreSQL before the kill committed caches "no entry" afterwards: ignored
      expect(await merge('0')).toBe(0);
      // an older kill is weaker than the newer one
      expect(await merge(String(Number(killed) - 100))).toBe(0);
      expect(await appRedis.get(key)).toBe(killed);
      await as(t, owner).delete(agentsUrl(owner, `/${a.id}`)).expect(200);
      expect(await appRedis.get(key)).toBe('all');
      expect(await merge('0')).toBe(0);
      expect(await merge(String(Date.now() / 1000))).toBe(0);
      expect(await appRedis.get(key)).toBe('all');
      expect((await bearerCall(t, token).expect(401)).headers['www-authenticate']).toBe(AGENT_REVOKED);
    });

    it('ignores the denylist for tokens of other agents and for user tokens', async () => {
      const revoked = await registerAgent(t, owner);
      const active = await registerAgent(t, owner);
      await as(t, owner).delete(agentsUrl(owner, `/${revoked.id}`)).expect(200);
      await bearerCall(t, (await agentToken(t, user, active.id)).token).expect(200);
      await bearerCall(t, user.accessToken).expect(200);
    });
  });

  describe('kill-tokens: outstanding tokens refused, the agent stays usable', () => {
    it('refuses tokens issued before the kill, accepts tokens issued after it, also after a Redis flush', async () => {
      const a = await registerAgent(t, owner, { agent_token_max_ttl_sec: 300 });
      const before = (await agentToken(t, user, a.id)).token;
      await bearerCall(t, before).expect(200);
      const kill = await as(t, owner).post(agentsUrl(owner, `/${a.id}/kill-tokens`)).expect(200);
      const killSecond = Math.floor(Date.parse(kill.body.not_before) / 1000);
      expect((await bearerCall(t, before).expect(401)).headers['www-authenticate']).toBe(AGENT_REVOKED);
      await nextSecond();
      const after = (await agentToken(t, user, a.id)).token;
      await bearerCall(t, after).expect(200);
      await flushTestPrefix(redis);
      expect((await bearerCall(t, before).expect(401)).headers['www-authenticate']).toBe(AGENT_REVOKED);
      await bearerCall(t, after).expect(200);
      const svc = t.app.get(AgentDenylistService);
      // after the flush, read back from PostgreSQL: tokens of the kill's second and before, not after
      await expect(svc.isDenied(a.id, killSecond)).resolves.toBe(true);
      await expect(svc.isDenied(a.id, killSecond + 1)).resolves.toBe(false);
      const now = Math.floor(Date.now() / 1000);
      // a later revoke refuses every token, including those issued after the kill
      await as(t, owner).delete(agentsUrl(owner, `/${a.id}`)).expect(200);
      expect((await bearerCall(t, after).expect(401)).headers['www-authenticate']).toBe(AGENT_REVOKED);
      await expect(svc.isDenied(a.id, now + 10)).resolves.toBe(true);
    });

    it('a second kill moves not_before forward', async () => {
      const a = await registerAgent(t, owner);
      await as(t, owner).post(agentsUrl(owner, `/${a.id}/kill-tokens`)).expect(200);
      await nextSecond();
      const between = (await agentToken(t, user, a.id)).token;
      await bearerCall(t, between).expect(200);
      await as(t, owner).post(agentsUrl(owner, `/${a.id}/kill-tokens`)).expect(200);
      expect((await bearerCall(t, between).expect(401)).headers['www-authenticate']).toBe(AGENT_REVOKED);
      await flushTestPrefix(redis);
      expect((await bearerCall(t, between).expect(401)).headers['www-authenticate']).toBe(AGENT_REVOKED);
      expect(await t.db.query(`SELECT 1 FROM audit_events WHERE type = 'oauth.token_exchange.revocation_requested' AND target_id = $1`, [a.id])).toHaveLength(2);
    });
  });

  describe('expired entries', () => {
    it('stop refusing once expires_at passed (the tokens they covered have expired)', async () => {
      const a = await registerAgent(t, owner, { agent_token_max_ttl_sec: 60 });
      const { token } = await agentToken(t, user, a.id, 600);
      await as(t, owner).post(agentsUrl(owner, `/${a.id}/kill-tokens`)).expect(200);
      await bearerCall(t, token).expect(401);
      await t.db.query(`UPDATE agent_denylist SET expires_at = now() - interval '1 second' WHERE agent_client_id = $1`, [a.id]);
      await flushTestPrefix(redis);
      await bearerCall(t, token).expect(200);
    });
  });

  describe('Redis unreachable: the denylist check fails closed', () => {
    it('answers 503 for agent tokens and throws from isDenied', async () => {
      const a = await registerAgent(t, owner);
      const { token } = await agentToken(t, user, a.id);
      const down = await createTestApp({ REDIS_URL: 'redis://127.0.0.1:1' });
      try {
        const res = await down.http().get('/v1/auth/me').set('Authorization', `Bearer ${token}`);
        expect(res.status).toBe(503);
        expect(res.body.code).toBe('server/unavailable');
        await expect(down.app.get(AgentDenylistService).isDenied(a.id, Math.floor(Date.now() / 1000))).rejects.toMatchObject({ status: 503 });
      } finally {
        const client = down.app.get<Redis>(REDIS);
        await down.close();
        // ioredis keeps retrying a refused connection until told to stop
        client.disconnect();
      }
    });
  });
});
