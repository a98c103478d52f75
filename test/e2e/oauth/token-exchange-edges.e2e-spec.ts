import { createOAuthClient } from '../../factories/agent.factory';
import { createTestApp, TestApp } from '../../setup/app';
import { agentsUrl, as, endUser, registerAgent, Session, tenantOnTier } from '../agents/agents.helpers';
import { claims, exchangeBody, postToken } from './oauth-helpers';

const AGENT_REVOKED = 'Bearer error="invalid_token", error_description="agent_revoked"';

/**
 * Edges found by a black-box review: a denylist entry outlives every token it refuses even after
 * the agent's TTL was lowered; an agent token minted for another audience is not accepted here;
 * unsupported grant types are unsupported for every client; refused exchanges are webhooks too.
 */
describe('token exchange: denylist lifetime, audience, grant types, refusal webhooks', () => {
  let t: TestApp;
  let owner: Session;
  beforeAll(async () => {
    t = await createTestApp();
    owner = await tenantOnTier(t, 'pro');
  });
  afterAll(() => t.close());

  const agentCreds = (a: Record<string, any>) => ({ id: a.id as string, secret: a.client_secret as string });

  for (const action of ['DELETE', 'kill-tokens'] as const) {
    it(`${action} after the TTL was lowered: the denylist entry lasts as long as the tokens minted before (spec 5 rule 1)`, async () => {
      const a = await registerAgent(t, owner, { agent_token_max_ttl_sec: 900 });
      const user = await endUser(t, owner);
      const minted = await postToken(t, agentCreds(a), exchangeBody(user.accessToken, { scope: 'openid', expires_in: '900' })).expect(200);
      const token = minted.body.access_token as string;
      const exp = claims(token).exp as number;
      expect(exp - (claims(token).iat as number)).toBe(900);
      await as(t, owner).patch(agentsUrl(owner, `/${a.id}`), { agent_token_max_ttl_sec: 60 }).expect(200);
      if (action === 'DELETE') await as(t, owner).delete(agentsUrl(owner, `/${a.id}`)).expect(200);
      else await as(t, owner).post(agentsUrl(owner, `/${a.id}/kill-tokens`)).expect(200);
      const [entry] = await t.db.query<{ until: number }>(`SELECT extract(epoch FROM expires_at)::bigint AS until FROM agent_denylist WHERE agent_client_id = $1`, [a.id]);
      expect(Number(entry.until)).toBeGreaterThanOrEqual(exp);
      const me = await t.http().get('/v1/auth/me').set('Authorization', `Bearer ${token}`).expect(401);
      expect(me.headers['www-authenticate']).toBe(AGENT_REVOKED);
    });
  }

  it('DELETE after an exchange: the denylist entry lasts agent_token_max_ttl_sec (spec 3.2) when no token outlives it, not 900 s after the exchange', async () => {
    const a = await registerAgent(t, owner, { agent_token_max_ttl_sec: 120 });
    const user = await endUser(t, owner);
    const minted = await postToken(t, agentCreds(a), exchangeBody(user.accessToken, { scope: 'openid' })).expect(200);
    expect(minted.body.expires_in).toBe(120);
    await as(t, owner).delete(agentsUrl(owner, `/${a.id}`)).expect(200);
    const [entry] = await t.db.query<{ ttl: number }>(`SELECT extract(epoch FROM expires_at - not_before)::int AS ttl FROM agent_denylist WHERE agent_client_id = $1`, [a.id]);
    expect(entry.ttl).toBe(120);
    expect((await t.http().get('/v1/auth/me').set('Authorization', `Bearer ${minted.body.access_token}`).expect(401)).headers['www-authenticate']).toBe(AGENT_REVOKED);
  });

  it('/me with an agent token shows what its narrowed scope grants: the address only with `email`, the profile (public_metadata, last sign-in) only with `profile` (the user\'s own token sees it all)', async () => {
    const a = await registerAgent(t, owner, { scopes: ['openid', 'email', 'profile'] });
    const user = await endUser(t, owner);
    await t.db.query(`UPDATE users SET public_metadata = '{"phone": "+33 6 12 34 56 78"}', last_sign_in_at = now() WHERE id = $1`, [user.userId]);
    const meWith = async (token: string) => (await t.http().get('/v1/auth/me').set('Authorization', `Bearer ${token}`).expect(200)).body;
    const own = await meWith(user.accessToken);
    expect(own).toMatchObject({ id: user.userId, email: expect.any(String), email_verified: false, public_metadata: { phone: '+33 6 12 34 56 78' }, last_sign_in_at: expect.any(String) });
    const narrow = await postToken(t, agentCreds(a), exchangeBody(user.accessToken, { scope: 'openid' })).expect(200);
    // twice: the second answer comes from the profile cache the first filled
    for (let i = 0; i < 2; i++) {
      const body = await meWith(narrow.body.access_token);
      expect(body).toEqual({ ...own, email: null, email_verified: false, public_metadata: {}, last_sign_in_at: null });
    }
    const mail = await postToken(t, agentCreds(a), exchangeBody(user.accessToken, { scope: 'openid email' })).expect(200);
    expect(await meWith(mail.body.access_token)).toEqual({ ...own, public_metadata: {}, last_sign_in_at: null });
    const profile = await postToken(t, agentCreds(a), exchangeBody(user.accessToken, { scope: 'openid profile' })).expect(200);
    expect(await meWith(profile.body.access_token)).toEqual({ ...own, email: null, email_verified: false });
    const wide = await postToken(t, agentCreds(a), exchangeBody(user.accessToken, { scope: 'openid email profile' })).expect(200);
    expect(await meWith(wide.body.access_token)).toEqual(own);
    // and the narrowed answer did not change what the cache holds for the user
    expect(await meWith(user.accessToken)).toEqual(own);
  });

  describe('the agent-client cache (AGENT_CLIENT_CACHE_TTL_SECONDS)', () => {
    it('every change through the API shows on the next exchange: rotate-secret, PATCH of scopes, disable, revoke, a tier change', async () => {
      const a = await registerAgent(t, owner, { scopes: ['openid', 'profile'] });
      const user = await endUser(t, owner);
      const exchange = (creds: { id: string; secret: string }, scope = 'openid profile') => postToken(t, creds, exchangeBody(user.accessToken, { scope }));
      // the first exchange fills the cache
      expect((await exchange(agentCreds(a)).expect(200)).body.scope).toBe('openid profile');
      const rotated = (await as(t, owner).post(agentsUrl(owner, `/${a.id}/rotate-secret`)).expect(200)).body;
      expect((await exchange(agentCreds(a)).expect(401)).body.error).toBe('invalid_client');
      const creds = agentCreds(rotated);
      await exchange(creds).expect(200);
      await as(t, owner).patch(agentsUrl(owner, `/${a.id}`), { scopes: ['openid'] }).expect(200);
      expect((await exchange(creds).expect(200)).body.scope).toBe('openid');
      // the operator moves the tenant to free: agent clients need Pro (spec 5 rule 3)
      await t.db.query(`UPDATE tenants SET tier = 'free' WHERE id = $1`, [owner.tenantId]);
      await t.tenantChanged(owner.tenantId);
      expect((await exchange(creds).expect(400)).body.error).toBe('unauthorized_client');
      await t.db.query(`UPDATE tenants SET tier = 'pro' WHERE id = $1`, [owner.tenantId]);
      await t.tenantChanged(owner.tenantId);
      await exchange(creds).expect(200);
      await as(t, owner).post(agentsUrl(owner, `/${a.id}/disable`)).expect(200);
      expect((await exchange(creds).expect(400)).body.error).toBe('unauthorized_client');
      await as(t, owner).patch(agentsUrl(owner, `/${a.id}`), { grant_types: ['urn:ietf:params:oauth:grant-type:token-exchange'] }).expect(200);
      await exchange(creds).expect(200);
      await as(t, owner).delete(agentsUrl(owner, `/${a.id}`)).expect(200);
      expect((await exchange(creds).expect(401)).body.error).toBe('invalid_client');
    });

    it('a secret changed behind the cache (an invalidation lost) still issues nothing: the issuing statement compares the secret', async () => {
      const a = await registerAgent(t, owner);
      const user = await endUser(t, owner);
      await postToken(t, agentCreds(a), exchangeBody(user.accessToken, { scope: 'openid' })).expect(200);
      // a rotation whose cache invalidation never happened: the cached row still holds the old hash
      await t.db.query(`UPDATE agent_clients SET secret_hash = $2 WHERE id = $1`, [a.id, 'f'.repeat(64)]);
      const res = await postToken(t, agentCreds(a), exchangeBody(user.accessToken, { scope: 'openid' })).expect(401);
      expect(res.body.error).toBe('invalid_client');
      expect(res.body.access_token).toBeUndefined();
      const issued = await t.db.query(`SELECT 1 FROM agent_actions WHERE agent_client_id = $1 AND action = 'token_exchange'`, [a.id]);
      expect(issued).toHaveLength(1);
    });
  });

  it('an agent that exchanged nothing recently is denylisted for exactly agent_token_max_ttl_sec', async () => {
    const a = await registerAgent(t, owner, { agent_token_max_ttl_sec: 120 });
    await as(t, owner).delete(agentsUrl(owner, `/${a.id}`)).expect(200);
    const [entry] = await t.db.query<{ ttl: number }>(`SELECT round(extract(epoch FROM expires_at - not_before))::int AS ttl FROM agent_denylist WHERE agent_client_id = $1`, [a.id]);
    expect(entry.ttl).toBe(120);
  });

  it('an agent token minted for another audience is refused by this service (401); one without an audience is accepted', async () => {
    const a = await registerAgent(t, owner);
    const user = await endUser(t, owner);
    const foreign = await postToken(t, agentCreds(a), exchangeBody(user.accessToken, { scope: 'openid', audience: 'https://payments.other.example' })).expect(200);
    expect(claims(foreign.body.access_token).aud).toBe('https://payments.other.example');
    const refused = await t.http().get('/v1/auth/me').set('Authorization', `Bearer ${foreign.body.access_token}`).expect(401);
    expect(refused.headers['www-authenticate']).toMatch(/^Bearer error="invalid_token"/);
    const own = await postToken(t, agentCreds(a), exchangeBody(user.accessToken, { scope: 'openid' })).expect(200);
    await t.http().get('/v1/auth/me').set('Authorization', `Bearer ${own.body.access_token}`).expect(200);
  });

  it('a legacy client asking for a grant this server does not serve gets unsupported_grant_type, and no client_unauthorized event', async () => {
    const legacy = await createOAuthClient(t.db, owner.tenantId);
    for (const grant of ['client_credentials', 'password', 'authorization_code']) {
      const r = await postToken(t, legacy, { grant_type: grant }).expect(400);
      expect(r.body.error).toBe('unsupported_grant_type');
    }
    expect(await t.db.query(`SELECT 1 FROM audit_events WHERE type = 'oauth.token_exchange.client_unauthorized' AND actor_id = $1`, [legacy.id])).toHaveLength(0);
    // token exchange itself is still refused to it, with the event
    const user = await endUser(t, owner);
    expect((await postToken(t, legacy, exchangeBody(user.accessToken)).expect(400)).body.error).toBe('unauthorized_client');
    expect(await t.db.query(`SELECT 1 FROM audit_events WHERE type = 'oauth.token_exchange.client_unauthorized' AND actor_id = $1`, [legacy.id])).toHaveLength(1);
  });

  it('refused exchanges are webhooks as well as audit events (spec 6), with hash prefixes only', async () => {
    const a = await registerAgent(t, owner, { scopes: ['calendar.read'] });
    const user = await endUser(t, owner);
    await postToken(t, agentCreds(a), exchangeBody('not-a-jwt')).expect(400);
    await postToken(t, agentCreds(a), exchangeBody(user.accessToken, { scope: 'openid' })).expect(400);
    const hooks = await t.db.query<{ event_type: string; payload: Record<string, unknown> }>(
      `SELECT event_type, payload FROM outbox WHERE topic = 'webhook' AND payload->>'agent_client_id' = $1 ORDER BY id`,
      [a.id],
    );
    const types = hooks.map((h) => h.event_type);
    expect(types).toEqual(expect.arrayContaining(['oauth.token_exchange.subject_invalid', 'oauth.token_exchange.scope_denied']));
    const invalid = hooks.find((h) => h.event_type === 'oauth.token_exchange.subject_invalid')!;
    expect(invalid.payload).toMatchObject({ agent_client_id: a.id, subject_invalid_reason: expect.any(String) });
    expect(JSON.stringify(hooks)).not.toContain(user.accessToken);
    expect(JSON.stringify(hooks)).not.toContain('not-a-jwt');
  });
});
