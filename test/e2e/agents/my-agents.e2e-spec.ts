import { AgentDenylistService } from '../../../src/modules/agents/agent-denylist.service';
import { createApiKey } from '../../factories/dashboard.factory';
import { gateWrites } from '../../setup/hold-writes';
import { createTestApp, randomIp, STRONG_PASSWORD, TestApp, uniqueEmail } from '../../setup/app';
import { agentToken, agentsUrl, as, bearerCall, endUser, EndUser, insertAction, registerAgent, Session, tenantOnTier } from './agents.helpers';

describe('agents API, end user (spec 4.5, 3.3, RestoreMyAgentResponse)', () => {
  let t: TestApp;
  let owner: Session;
  let other: Session;
  let alice: EndUser;
  let bob: EndUser;
  let stranger: EndUser;
  let denylist: AgentDenylistService;
  const base = Date.parse('2030-06-01T00:00:00Z');
  const at = (minutes: number) => new Date(base + minutes * 60_000);
  const me = (u: EndUser, path = '') => ({
    get: () => t.http().get(`/v1/users/me/agents${path}`).set('Authorization', `Bearer ${u.accessToken}`),
    delete: () => t.http().delete(`/v1/users/me/agents${path}`).set('Authorization', `Bearer ${u.accessToken}`),
    restore: () => t.http().post(`/v1/users/me/agents${path}/restore`).set('Authorization', `Bearer ${u.accessToken}`),
  });
  const audits = (type: string, userId: string, agentId: string) =>
    t.db.query(`SELECT * FROM audit_events WHERE type = $1 AND actor_id = $2 AND target_id = $3`, [type, userId, agentId]);

  beforeAll(async () => {
    t = await createTestApp();
    owner = await tenantOnTier(t, 'pro');
    other = await tenantOnTier(t, 'pro');
    alice = await endUser(t, owner);
    bob = await endUser(t, owner);
    stranger = await endUser(t, other);
    denylist = t.app.get(AgentDenylistService);
  });
  afterAll(() => t.close());

  describe('GET /v1/users/me/agents', () => {
    it('lists the agents that acted on me, last_action_at descending, with action_count and both revocations', async () => {
      const older = await registerAgent(t, owner, { name: 'Older', agent_class: 'mcp-server', logo_url: 'https://cdn.example.com/o.png' });
      const newer = await registerAgent(t, owner, { name: 'Newer' });
      const bobsOnly = await registerAgent(t, owner, { name: 'Bob only' });
      for (let i = 0; i < 3; i++) await insertAction(t, { tenantId: owner.tenantId, agentId: older.id, actorUserId: alice.userId, createdAt: at(i) });
      await insertAction(t, { tenantId: owner.tenantId, agentId: newer.id, actorUserId: alice.userId, createdAt: at(30) });
      await insertAction(t, { tenantId: owner.tenantId, agentId: bobsOnly.id, actorUserId: bob.userId, createdAt: at(40) });
      await insertAction(t, { tenantId: owner.tenantId, agentId: older.id, actorUserId: null, createdAt: at(50) });
      await as(t, owner).delete(agentsUrl(owner, `/${newer.id}`)).expect(200);
      const revoked = await me(alice, `/${older.id}`).delete().expect(200);

      const res = await me(alice).get().expect(200);
      expect(res.body).toEqual({
        data: [
          { agent_client_id: newer.id, agent_name: 'Newer', last_action_at: at(30).toISOString(), action_count: 1, agent_revoked_at: expect.any(String) },
          {
            agent_client_id: older.id,
            agent_name: 'Older',
            agent_logo_url: 'https://cdn.example.com/o.png',
            agent_class: 'mcp-server',
            last_action_at: at(2).toISOString(),
            action_count: 3,
            revoked_at: revoked.body.revoked_at,
          },
        ],
        pagination: { next_cursor: null, has_more: false },
      });
      const bobs = await me(bob).get().expect(200);
      expect(bobs.body.data.map((a: { agent_client_id: string }) => a.agent_client_id)).toEqual([bobsOnly.id]);
      expect((await me(stranger).get().expect(200)).body.data).toEqual([]);
    });

    it('pages with a cursor (default 20, max 100); an agent I revoked before it acted is listed last', async () => {
      const u = await endUser(t, owner);
      const ids: string[] = [];
      for (let i = 0; i < 4; i++) {
        const a = await registerAgent(t, owner, { name: `p${i}` });
        ids.push(a.id);
        await insertAction(t, { tenantId: owner.tenantId, agentId: a.id, actorUserId: u.userId, createdAt: at(100 + i) });
      }
      const silent = await registerAgent(t, owner, { name: 'silent' });
      await me(u, `/${silent.id}`).delete().expect(200);
      const p1 = await me(u, '?limit=3').get().expect(200);
      expect(p1.body.data.map((a: { agent_name: string }) => a.agent_name)).toEqual(['p3', 'p2', 'p1']);
      expect(p1.body.pagination.has_more).toBe(true);
      const p2 = await t.http().get(`/v1/users/me/agents?limit=3&cursor=${encodeURIComponent(p1.body.pagination.next_cursor)}`).set('Authorization', `Bearer ${u.accessToken}`).expect(200);
      expect(p2.body.data.map((a: { agent_name: string }) => a.agent_name)).toEqual(['p0', 'silent']);
      expect(p2.body.data[1]).toEqual({ agent_client_id: silent.id, agent_name: 'silent', action_count: 0, revoked_at: expect.any(String) });
      expect(p2.body.pagination).toEqual({ next_cursor: null, has_more: false });
      for (const q of ['?limit=0', '?limit=101', '?cursor=bad.cursor', '?x=1']) {
        const res = await me(u, q).get().expect(400);
        expect(['request/invalid', 'request/invalid_cursor']).toContain(res.body.code);
      }
    });

    it('an agent acting while the list is walked keeps its place: every agent is listed exactly once', async () => {
      const u = await endUser(t, owner);
      const ids: string[] = [];
      for (let i = 0; i < 6; i++) {
        const a = await registerAgent(t, owner, { name: `w${i}` });
        ids.push(a.id);
        await insertAction(t, { tenantId: owner.tenantId, agentId: a.id, actorUserId: u.userId, createdAt: at(200 + i) });
      }
      const page = (cursor?: string) =>
        t.http().get(`/v1/users/me/agents?limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`).set('Authorization', `Bearer ${u.accessToken}`).expect(200);
      const seen: string[] = [];
      let res = await page();
      seen.push(...res.body.data.map((a: { agent_name: string }) => a.agent_name));
      // the agent the walk has not reached yet acts now: the newest action of all
      await insertAction(t, { tenantId: owner.tenantId, agentId: ids[1], actorUserId: u.userId, createdAt: at(300) });
      while (res.body.pagination.next_cursor) {
        res = await page(res.body.pagination.next_cursor);
        seen.push(...res.body.data.map((a: { agent_name: string }) => a.agent_name));
      }
      expect(seen).toEqual(['w5', 'w4', 'w3', 'w2', 'w1', 'w0']);
      // a new walk sorts by the action of now
      expect((await page()).body.data[0].agent_name).toBe('w1');
    });

    it('requires a bearer token of the user (agent tokens may not manage agents)', async () => {
      expect((await t.http().get('/v1/users/me/agents').expect(401)).headers['www-authenticate']).toMatch(/^Bearer/);
      const a = await registerAgent(t, owner);
      const { token } = await agentToken(t, alice, a.id);
      const res = await t.http().get('/v1/users/me/agents').set('Authorization', `Bearer ${token}`).expect(403);
      expect(res.body.code).toBe('auth/forbidden');
      await t.http().post(`/v1/users/me/agents/${a.id}/restore`).set('Authorization', `Bearer ${token}`).expect(403);
      await t.http().delete(`/v1/users/me/agents/${a.id}`).set('Authorization', `Bearer ${token}`).expect(403);
    });

    it('RFC 6750 section 3.1: every bearer route refusing an agent token for lack of privilege (403 auth/forbidden) carries Bearer error="insufficient_scope", the problem body unchanged', async () => {
      const a = await registerAgent(t, owner);
      const { token } = await agentToken(t, alice, a.id);
      const refusals: [string, 'get' | 'post' | 'delete', string, object?][] = [
        ['my agents', 'get', '/v1/users/me/agents'],
        ['my agent revoke', 'delete', `/v1/users/me/agents/${a.id}`],
        ['my agent restore', 'post', `/v1/users/me/agents/${a.id}/restore`],
        ['logout', 'post', '/v1/auth/logout'],
        ['password change', 'post', '/v1/auth/password/change', { current_password: STRONG_PASSWORD, new_password: `${STRONG_PASSWORD}x` }],
        ['step-up by password', 'post', '/v1/auth/step-up/password', { password: STRONG_PASSWORD }],
        ['step-up by email code', 'post', '/v1/auth/step-up/email-otp', {}],
        ['MFA enrollment', 'post', '/v1/auth/mfa/totp/setup', {}],
        ['MFA recovery codes', 'post', '/v1/auth/mfa/recovery-codes', { code: '123456', password: STRONG_PASSWORD }],
      ];
      for (const [name, method, path, body] of refusals) {
        const req = t.http()[method](path).set('Authorization', `Bearer ${token}`).set('X-Forwarded-For', randomIp());
        const res = await (body ? req.send(body) : req);
        expect([name, res.status, res.body.code]).toEqual([name, 403, 'auth/forbidden']);
        expect([name, res.headers['www-authenticate']]).toEqual([name, `Bearer error="insufficient_scope", error_description="${res.body.detail.replace(/"/g, '')}"`]);
      }
    });
  });

  describe('guests', () => {
    it('a guest may withdraw an agent before any could act for it; the withdrawal stays with the account it registers (same user id)', async () => {
      const a = await registerAgent(t, owner);
      await t.db.query(`UPDATE tenants SET anonymous_signins_enabled = true WHERE id = $1`, [owner.tenantId]);
      await t.tenantChanged(owner.tenantId);
      const key = (await createApiKey(t, owner as never)).key;
      const guest = await t.http().post('/v1/auth/anonymous').set('X-API-Key', key).set('X-Forwarded-For', randomIp()).send({}).expect(201);
      const g: EndUser = { userId: guest.body.user.id, tenantId: owner.tenantId, accessToken: guest.body.access_token, email: '' };
      expect((await me(g).get().expect(200)).body.data).toEqual([]);
      await me(g, `/${a.id}`).delete().expect(200);
      const claimed = await t.http().post('/v1/auth/register').set('X-API-Key', key).set('Authorization', `Bearer ${g.accessToken}`).set('X-Forwarded-For', randomIp())
        .send({ email: uniqueEmail('claimed'), password: STRONG_PASSWORD, consent: true }).expect(201);
      expect(claimed.body.user.id).toBe(g.userId);
      expect(await denylist.isUserRevoked(owner.tenantId, g.userId, a.id)).toBe(true);
      const listed = (await me({ ...g, accessToken: claimed.body.access_token }).get().expect(200)).body.data;
      expect(listed).toEqual([expect.objectContaining({ agent_client_id: a.id, revoked_at: expect.any(String) })]);
    });
  });

  describe('spec 3.3: DELETE /v1/users/me/agents/{agentClientId}', () => {
    it('row 1: records the withdrawal (gdpr_art_7_withdrawal) for this (tenant, user, agent); issuance is refused, issued tokens stay valid', async () => {
      const a = await registerAgent(t, owner);
      const issued = (await agentToken(t, alice, a.id)).token;
      expect(await denylist.isUserRevoked(owner.tenantId, alice.userId, a.id)).toBe(false);
      const res = await me(alice, `/${a.id}`).delete().expect(200);
      expect(res.body).toEqual({ agent_client_id: a.id, revoked_at: expect.any(String), reason: 'gdpr_art_7_withdrawal' });
      expect(new Date(res.body.revoked_at).toISOString()).toBe(res.body.revoked_at);
      const rows = await t.db.query(`SELECT tenant_id, user_id, reason FROM agent_user_revocations WHERE agent_client_id = $1`, [a.id]);
      expect(rows).toEqual([{ tenant_id: owner.tenantId, user_id: alice.userId, reason: 'gdpr_art_7_withdrawal' }]);
      expect(await denylist.isUserRevoked(owner.tenantId, alice.userId, a.id)).toBe(true);
      // only this pair: bob, and alice with another agent, are unaffected
      expect(await denylist.isUserRevoked(owner.tenantId, bob.userId, a.id)).toBe(false);
      // spec 3.3: already-issued tokens stay valid until their TTL
      await bearerCall(t, issued).expect(200);
      const [audit] = await audits('agent.user_revoked', alice.userId, a.id);
      expect(audit).toMatchObject({ tenant_id: owner.tenantId, actor_type: 'user', metadata: { agent_client_id: a.id, reason: 'gdpr_art_7_withdrawal' } });
    });

    it('row 2: a repeat is 200 with the unchanged revoked_at and no second audit event, also when 5 race', async () => {
      const a = await registerAgent(t, owner);
      const answers = await Promise.all(Array.from({ length: 5 }, () => me(alice, `/${a.id}`).delete()));
      expect(answers.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
      expect(new Set(answers.map((r) => r.body.revoked_at)).size).toBe(1);
      const again = await me(alice, `/${a.id}`).delete().expect(200);
      expect(again.body).toEqual(answers[0].body);
      expect(await audits('agent.user_revoked', alice.userId, a.id)).toHaveLength(1);
    });

    it('answers the agent id as stored whatever the case of the id in the path (one identifier)', async () => {
      const a = await registerAgent(t, owner);
      const upper = a.id.toUpperCase();
      const revoked = await me(alice, `/${upper}`).delete().expect(200);
      expect(revoked.body.agent_client_id).toBe(a.id);
      expect((await me(alice, `/${a.id}`).delete().expect(200)).body).toEqual(revoked.body);
      expect((await me(alice, `/${upper}`).restore().expect(200)).body).toMatchObject({ agent_client_id: a.id, newly_restored: true });
      expect((await as(t, owner).get(agentsUrl(owner, `/${upper}`)).expect(200)).body.id).toBe(a.id);
    });

    it('works for an agent the tenant revoked or disabled too', async () => {
      const a = await registerAgent(t, owner);
      await as(t, owner).delete(agentsUrl(owner, `/${a.id}`)).expect(200);
      await me(alice, `/${a.id}`).delete().expect(200);
    });

    it('is 404 for an unknown agent, another tenant’s agent and a malformed id', async () => {
      const theirs = await registerAgent(t, other);
      const cross = await me(alice, `/${theirs.id}`).delete().expect(404);
      const unknown = await me(alice, '/00000000-0000-4000-8000-000000000000').delete().expect(404);
      const bad = await me(alice, '/xyz').delete().expect(404);
      expect(cross.body.code).toBe('agent/not_found');
      expect({ ...unknown.body, request_id: undefined }).toEqual({ ...cross.body, request_id: undefined });
      expect(bad.body.code).toBe('agent/not_found');
      expect(await t.db.query(`SELECT 1 FROM agent_user_revocations WHERE agent_client_id = $1`, [theirs.id])).toHaveLength(0);
      // and the other tenant's user cannot touch this tenant's agents
      const mine = await registerAgent(t, owner);
      expect((await me(stranger, `/${mine.id}`).delete().expect(404)).body.code).toBe('agent/not_found');
      expect((await me(stranger, `/${mine.id}`).restore().expect(404)).body.code).toBe('agent/not_found');
    });
  });

  describe('spec 3.3 row 3: restore', () => {
    it('restores (newly_restored true, one audit event); a repeat is a no-op with the current time and no event', async () => {
      const a = await registerAgent(t, owner);
      const revoked = await me(alice, `/${a.id}`).delete().expect(200);
      const res = await me(alice, `/${a.id}`).restore().expect(200);
      expect(res.body).toEqual({ agent_client_id: a.id, restored_at: expect.any(String), newly_restored: true });
      expect(await denylist.isUserRevoked(owner.tenantId, alice.userId, a.id)).toBe(false);
      expect(await audits('agent.user_restored', alice.userId, a.id)).toHaveLength(1);
      const noop = await me(alice, `/${a.id}`).restore().expect(200);
      expect(noop.body).toEqual({ agent_client_id: a.id, restored_at: expect.any(String), newly_restored: false });
      expect(Math.abs(Date.parse(noop.body.restored_at) - Date.now())).toBeLessThan(60_000);
      expect(await audits('agent.user_restored', alice.userId, a.id)).toHaveLength(1);
      // listed without revoked_at now; revoking again sets a new revoked_at
      const listed = (await me(alice).get().expect(200)).body.data.find((x: { agent_client_id: string }) => x.agent_client_id === a.id);
      expect(listed).not.toHaveProperty('revoked_at');
      const again = await me(alice, `/${a.id}`).delete().expect(200);
      expect(Date.parse(again.body.revoked_at)).toBeGreaterThanOrEqual(Date.parse(revoked.body.revoked_at));
      expect(await audits('agent.user_revoked', alice.userId, a.id)).toHaveLength(2);
    });

    it('a restore of an agent never revoked is a no-op (newly_restored false, no still_blocked_by)', async () => {
      const a = await registerAgent(t, owner);
      await as(t, owner).delete(agentsUrl(owner, `/${a.id}`)).expect(200);
      const res = await me(bob, `/${a.id}`).restore().expect(200);
      expect(res.body).toEqual({ agent_client_id: a.id, restored_at: expect.any(String), newly_restored: false });
    });

    it('a dashboard revoke or disable sent while a restore runs waits for it: the restore answers the agent as it was (usable), the block follows', async () => {
      for (const block of ['revoke', 'disable'] as const) {
        const a = await registerAgent(t, owner);
        await me(alice, `/${a.id}`).delete().expect(200);
        // the restore stops inside its transaction (the agent read, the withdrawal being lifted)
        const gate = await gateWrites(t.db, 'agent_user_revocations', 'UPDATE', `NEW.agent_client_id = '${a.id}' AND NEW.revoked_at IS NULL`);
        let restored, blocked;
        let restoredAt = 0;
        try {
          const restoring = me(alice, `/${a.id}`).restore().then((r) => ((restoredAt = Date.now()), r));
          const pid = await gate.reached();
          const blocking = (block === 'revoke' ? as(t, owner).delete(agentsUrl(owner, `/${a.id}`)) : as(t, owner).post(agentsUrl(owner, `/${a.id}/disable`), {})).then((r) => ({ r, at: Date.now() }));
          // the block waits for the restore's share lock of the agent (unlocked, it committed here,
          // and the restore then answered "usable" after the block's 200)
          await gate.waitedOnBy(pid);
          await gate.open();
          [restored, blocked] = await Promise.all([restoring, blocking]);
        } finally {
          await gate.release();
        }
        expect([restored.status, blocked.r.status]).toEqual([200, 200]);
        expect(restored.body).toEqual({ agent_client_id: a.id, restored_at: expect.any(String), newly_restored: true });
        expect(restoredAt).toBeLessThanOrEqual(blocked.at);
        // and a restore now says the block
        await me(alice, `/${a.id}`).delete().expect(200);
        expect((await me(alice, `/${a.id}`).restore().expect(200)).body.still_blocked_by).toBe('tenant');
      }
    });

    it('says still_blocked_by tenant when the tenant revoked (or disabled) the agent', async () => {
      const a = await registerAgent(t, owner);
      await me(alice, `/${a.id}`).delete().expect(200);
      await as(t, owner).delete(agentsUrl(owner, `/${a.id}`)).expect(200);
      const res = await me(alice, `/${a.id}`).restore().expect(200);
      expect(res.body).toEqual({ agent_client_id: a.id, restored_at: expect.any(String), newly_restored: true, still_blocked_by: 'tenant' });
      const d = await registerAgent(t, owner);
      await me(alice, `/${d.id}`).delete().expect(200);
      await as(t, owner).post(agentsUrl(owner, `/${d.id}/disable`)).expect(200);
      expect((await me(alice, `/${d.id}`).restore().expect(200)).body.still_blocked_by).toBe('tenant');
    });

    it('says still_blocked_by tenant when the tenant is no longer on a tier agents need (Pro or higher)', async () => {
      const tenant = await tenantOnTier(t, 'pro');
      const carol = await endUser(t, tenant);
      const a = await registerAgent(t, tenant);
      await me(carol, `/${a.id}`).delete().expect(200);
      await t.db.query(`UPDATE tenants SET tier = 'free' WHERE id = $1`, [tenant.tenantId]);
      await t.tenantChanged(tenant.tenantId);
      expect((await me(carol, `/${a.id}`).restore().expect(200)).body).toEqual({ agent_client_id: a.id, restored_at: expect.any(String), newly_restored: true, still_blocked_by: 'tenant' });
    });
  });
});
