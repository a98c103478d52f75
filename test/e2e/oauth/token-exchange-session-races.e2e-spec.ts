import { createTestApp, randomIp, TestApp } from '../../setup/app';
import { holdWrites } from '../../setup/hold-writes';
import { endUser, registerAgent, Session, tenantOnTier } from '../agents/agents.helpers';
import { exchangeBody, postToken } from './oauth-helpers';

/**
 * Spec 4.3: subject tokens of revoked sessions are rejected. An exchange's issuing statement locks
 * the subject token's session (FOR SHARE) until it commits, so a session ending at the same time
 * (a logout; the erasure of its user) is ordered with it: an issuance already under way makes
 * the end wait, and the end then removes what it wrote (no activity row names an erased user);
 * an end under way makes the exchange wait and refuse (no agent token after the logout answered).
 * Triggers hold the racing statement for 600 ms, to make the window certain.
 */
describe('token exchange racing the end of its subject token\'s session', () => {
  let t: TestApp;
  let owner: Session;
  beforeAll(async () => {
    t = await createTestApp();
    owner = await tenantOnTier(t, 'pro');
  });
  afterAll(() => t.close());

  const exchangeFor = (agent: Record<string, any>, accessToken: string) =>
    postToken(t, { id: agent.id, secret: agent.client_secret }, exchangeBody(accessToken, { scope: 'openid' })).set('X-Forwarded-For', randomIp()).then((r) => r);

  it('an issuance under way when the user is erased: the erasure waits for it, then no row names the user (the exchange, first, got its token)', async () => {
    const agent = await registerAgent(t, owner);
    const u = await endUser(t, owner);
    const release = await holdWrites(t.db, 'agent_actions', 'INSERT', `NEW.actor_user_id = '${u.userId}'`);
    try {
      const exchange = exchangeFor(agent, u.accessToken);
      await new Promise((r) => setTimeout(r, 200));
      await t.http().delete(`/v1/auth/dashboard/tenants/${owner.slug}/users/${u.userId}`).set('Cookie', owner.cookie).set('X-CSRF-Token', owner.csrf).expect(204);
      expect((await exchange).status).toBe(200);
      expect(await t.db.query(`SELECT 1 FROM agent_actions WHERE actor_user_id = $1`, [u.userId])).toHaveLength(0);
      // the exchange's events come before the erasure's, never after it
      const events = await t.db.query<{ event_type: string }>(
        `SELECT event_type FROM outbox WHERE event_type IN ('oauth.token_exchange.issued', 'user.deleted') AND payload->>'user_id' = $1 ORDER BY id`,
        [u.userId],
      );
      expect(events.map((e) => e.event_type)).toEqual(['oauth.token_exchange.issued', 'user.deleted']);
    } finally {
      await release();
    }
  });

  it('a logout under way when the exchange arrives: the exchange waits and is refused (invalid_grant), nothing recorded as issued', async () => {
    const agent = await registerAgent(t, owner);
    const u = await endUser(t, owner);
    const release = await holdWrites(t.db, 'user_sessions', 'UPDATE', `NEW.user_id = '${u.userId}' AND NEW.revoked_at IS NOT NULL`);
    try {
      const logout = t.http().post('/v1/auth/logout').set('Authorization', `Bearer ${u.accessToken}`).then((r) => r);
      await new Promise((r) => setTimeout(r, 200));
      const exchange = await exchangeFor(agent, u.accessToken);
      expect((await logout).status).toBe(204);
      expect([exchange.status, exchange.body.error]).toEqual([400, 'invalid_grant']);
      expect(await t.db.query(`SELECT 1 FROM agent_actions WHERE actor_user_id = $1`, [u.userId])).toHaveLength(0);
    } finally {
      await release();
    }
  });
});
