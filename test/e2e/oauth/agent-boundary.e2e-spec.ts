import { createAgent, AgentFixture } from '../../factories/agent.factory';
import { createApiKey, DashboardFixture } from '../../factories/dashboard.factory';
import { createTestApp, randomIp, STRONG_PASSWORD, TestApp, uniqueEmail } from '../../setup/app';
import { tenantOnTier } from '../agents/agents.helpers';
import { claims, exchangeBody, postToken } from './oauth-helpers';

/**
 * Found by an agent-boundary review: an agent gets nothing from a session the MFA policy stopped;
 * a route needing a step-up refuses agent and guest tokens for what they are; a revocation by the
 * tenant is not shown as an action of the agent.
 */
describe('agent tokens at the boundaries of the user session', () => {
  let t: TestApp;
  let d: DashboardFixture;
  let apiKey: string;
  let agent: AgentFixture;

  beforeAll(async () => {
    t = await createTestApp();
    d = await tenantOnTier(t, 'pro');
    apiKey = (await createApiKey(t, d)).key;
    agent = await createAgent(t.db, d.tenantId, { rate_limits: { token_exchange_per_min: 600 } });
  });
  afterAll(() => t.close());

  const register = async () => {
    const res = await t.http().post('/v1/auth/register').set('X-API-Key', apiKey).set('X-Forwarded-For', randomIp()).send({ email: uniqueEmail('ab'), password: STRONG_PASSWORD, consent: true }).expect(201);
    return { id: res.body.user.id as string, access: res.body.access_token as string, refresh: res.body.refresh_token as string };
  };
  const exchangeFor = async (subject: string) => {
    const res = await postToken(t, agent, exchangeBody(subject));
    expect(res.status).toBe(200);
    return res.body.access_token as string;
  };
  const bearer = (method: 'get' | 'post', url: string, token: string, body?: object) => {
    const r = t.http()[method](url).set('Authorization', `Bearer ${token}`).set('X-Forwarded-For', randomIp());
    return body ? r.send(body) : r;
  };

  it('MFA required and the grace over: refresh, step-up and token exchange all refuse the session (audited mfa_enrollment_required)', async () => {
    const u = await register();
    await t.db.query(`UPDATE users SET created_at = now() - interval '60 days' WHERE id = $1`, [u.id]);
    await t.db.query(`UPDATE tenants SET mfa_policy = 'required', mfa_grace_period_days = 3, mfa_required_since = now() - interval '10 days' WHERE id = $1`, [d.tenantId]);
    await t.tenantChanged(d.tenantId);
    try {
      const refreshed = await t.http().post('/v1/auth/refresh').set('X-API-Key', apiKey).set('X-Forwarded-For', randomIp()).send({ refresh_token: u.refresh });
      expect([refreshed.status, refreshed.body.code]).toEqual([403, 'mfa/enrollment_required']);
      const stepped = await bearer('post', '/v1/auth/step-up/password', u.access, { password: STRONG_PASSWORD });
      expect([stepped.status, stepped.body.code]).toEqual([403, 'mfa/enrollment_required']);
      const res = await postToken(t, agent, exchangeBody(u.access, { expires_in: '900' }));
      expect({ status: res.status, error: res.body.error, token: res.body.access_token }).toEqual({ status: 400, error: 'invalid_grant', token: undefined });
      const rows = await t.db.query<{ metadata: Record<string, unknown> }>(
        `SELECT metadata FROM audit_events WHERE tenant_id = $1 AND type = 'oauth.token_exchange.subject_invalid' AND target_id = $2`,
        [d.tenantId, u.id],
      );
      expect(rows.map((r) => r.metadata.subject_invalid_reason)).toEqual(['mfa_enrollment_required']);
      // nothing issued was recorded either
      expect(await t.db.query(`SELECT 1 FROM agent_actions WHERE agent_client_id = $1 AND actor_user_id = $2`, [agent.id, u.id])).toEqual([]);
    } finally {
      await t.db.query(`UPDATE tenants SET mfa_policy = 'optional', mfa_required_since = NULL WHERE id = $1`, [d.tenantId]);
      await t.tenantChanged(d.tenantId);
    }
    // the policy lifted, the same session's token is exchanged again
    await exchangeFor(u.access);
  });

  it('POST /v1/auth/mfa/disable refuses an agent or a guest token as insufficient_scope (403 auth/forbidden), not with a step-up challenge it can never meet', async () => {
    const u = await register();
    const agentToken = await exchangeFor(u.access);
    await t.db.query(`UPDATE tenants SET anonymous_signins_enabled = true WHERE id = $1`, [d.tenantId]);
    await t.tenantChanged(d.tenantId);
    const guest = await t.http().post('/v1/auth/anonymous').set('X-API-Key', apiKey).set('X-Forwarded-For', randomIp()).send({}).expect(201);
    for (const tok of [agentToken, guest.body.access_token as string]) {
      const res = await bearer('post', '/v1/auth/mfa/disable', tok, { code: '123456', password: STRONG_PASSWORD });
      expect([res.status, res.body.code]).toEqual([403, 'auth/forbidden']);
      expect(res.headers['www-authenticate']).toMatch(/^Bearer error="insufficient_scope"/);
    }
    // the user's own token without a step-up still gets the RFC 9470 challenge
    const own = await bearer('post', '/v1/auth/mfa/disable', u.access, { code: '123456', password: STRONG_PASSWORD });
    expect([own.status, own.body.code]).toEqual([403, 'auth/step_up_required']);
    expect(own.headers['www-authenticate']).toContain('insufficient_user_authentication');
    expect(claims(agentToken).act).toEqual({ sub: agent.id });
  });

  it("a revocation of an agent token by the tenant's API key is not recorded as an action of the agent", async () => {
    const u = await register();
    const tok = await exchangeFor(u.access);
    const before = (await bearer('get', '/v1/users/me/agents', u.access).expect(200)).body.data;
    expect(before).toHaveLength(1);
    expect(before[0]).toMatchObject({ agent_client_id: agent.id, action_count: 1 });
    await t.http().post('/oauth/revoke').type('form').set('X-API-Key', apiKey).send({ token: tok }).expect(200);
    await bearer('get', '/v1/auth/me', tok).expect(401);
    const after = (await bearer('get', '/v1/users/me/agents', u.access).expect(200)).body.data;
    expect(after[0]).toMatchObject({ agent_client_id: agent.id, action_count: 1, last_action_at: before[0].last_action_at });
    expect(await t.db.query(`SELECT 1 FROM agent_actions WHERE agent_client_id = $1 AND actor_user_id = $2 AND action = 'token_revoked'`, [agent.id, u.id])).toEqual([]);
    // the tenant's revocation is audited as the tenant's
    const [row] = await t.db.query<{ actor_type: string }>(`SELECT actor_type FROM audit_events WHERE tenant_id = $1 AND type = 'oauth.token_revoked' AND target_id = $2`, [d.tenantId, u.id]);
    expect(row.actor_type).toBe('api_key');
  });
});
