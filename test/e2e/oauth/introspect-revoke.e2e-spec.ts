import * as client from 'openid-client';
import { JwtService } from '../../../src/shared/crypto/jwt.service';
import { SigningKeysService } from '../../../src/shared/crypto/signing-keys.service';
import { hashPrefix } from '../../../src/shared/crypto/tokens';
import { AgentDenylistService } from '../../../src/modules/agents/agent-denylist.service';
import { AgentFixture, createAgent, createOAuthClient } from '../../factories/agent.factory';
import { flushTestPrefix, rawRedis } from '../agents/agents.helpers';
import { createTenant, TenantFixture } from '../../factories/tenant.factory';
import { randomIp, STRONG_PASSWORD } from '../../setup/app';
import { basic, claims, discoverAs, exchange, exchangeBody, ListeningApp, login, oauthFailure, postToken, registerUser, RegisteredUser, startListeningApp } from './oauth-helpers';

describe('POST /oauth/introspect (RFC 7662) and POST /oauth/revoke (RFC 7009)', () => {
  let t: ListeningApp;
  let tenant: TenantFixture;
  let agent: AgentFixture;
  let user: RegisteredUser;
  let config: client.Configuration;

  beforeAll(async () => {
    t = await startListeningApp();
    tenant = await createTenant(t.db, { tier: 'pro' });
    agent = await createAgent(t.db, tenant.id, { rate_limits: { token_exchange_per_min: 600 } });
    user = await registerUser(t, tenant);
    config = await discoverAs(t.baseUrl, agent);
  });
  afterAll(() => t.close());

  const session = () => login(t, tenant, user.email);
  const agentToken = async (cfg: client.Configuration = config, u: RegisteredUser = user) => (await exchange(cfg, (await login(t, tenant, u.email)).access_token)).access_token;
  const introspectWithKey = (token: string, apiKey = tenant.apiKey) => t.http().post('/oauth/introspect').type('form').set('X-API-Key', apiKey).send({ token });
  const me = (token: string) => t.http().get('/v1/auth/me').set('Authorization', `Bearer ${token}`);
  /** A published kid over a payload that is not JSON (jsonwebtoken's decode throws on it). */
  const junkWithOurKid = (): string =>
    `${Buffer.from(JSON.stringify({ alg: 'RS256', typ: 'JWT', kid: t.app.get(SigningKeysService).signingKey().kid })).toString('base64url')}.${Buffer.from('hello').toString('base64url')}.c2ln`;

  describe('introspection', () => {
    it('an agent token is active with its claims; client_id and act name the agent (openid-client, Basic)', async () => {
      const tok = await agentToken();
      const c = claims(tok);
      const res = await client.tokenIntrospection(config, tok);
      expect(res).toMatchObject({
        active: true,
        sub: user.id,
        scope: 'openid profile email',
        client_id: agent.id,
        exp: c.exp,
        iat: c.iat,
        iss: t.baseUrl,
        aud: t.baseUrl,
        jti: c.jti,
        token_type: 'Bearer',
        tenant_id: tenant.id,
        act: { sub: agent.id },
      });
      expect(res.amr).toContain('tx');
    });

    it('answers with Cache-Control: no-store; a user token is active, its client the tenant, no act; the API key works too', async () => {
      const s = await session();
      const res = await introspectWithKey(s.access_token).expect(200);
      expect(res.headers['cache-control']).toBe('no-store');
      expect(res.body).toMatchObject({ active: true, sub: user.id, tenant_id: tenant.id, token_type: 'Bearer', is_anonymous: false, client_id: tenant.id });
      expect(res.body).not.toHaveProperty('act');
    });

    it('a legacy confidential client of the tenant may introspect (client_secret_post)', async () => {
      const legacy = await createOAuthClient(t.db, tenant.id, 'confidential');
      const cfg = await discoverAs(t.baseUrl, legacy, 'post');
      expect((await client.tokenIntrospection(cfg, await agentToken())).active).toBe(true);
    });

    it('garbage, expired, forged and other-tenant tokens are {active: false}', async () => {
      const other = await createTenant(t.db, { tier: 'pro' });
      const otherAgent = await createAgent(t.db, other.id);
      const otherCfg = await discoverAs(t.baseUrl, otherAgent);
      const tok = await agentToken();
      // a resource server of another tenant learns nothing
      expect(await client.tokenIntrospection(otherCfg, tok)).toEqual({ active: false });
      expect((await introspectWithKey(tok, other.apiKey).expect(200)).body).toEqual({ active: false });
      const expired = (await t.app.get(JwtService).sign({ sub: user.id, tenant_id: tenant.id, scope: 'openid', amr: ['pwd'], aal: 'AAL1', role: 'member', is_anonymous: false } as never, -10)).token;
      for (const bad of ['nope', expired, `${tok.slice(0, -4)}AAAA`, `${(await session()).refresh_token}`, junkWithOurKid()]) {
        expect(await client.tokenIntrospection(config, bad)).toEqual({ active: false });
      }
    });

    it('a denylisted (revoked) agent: its tokens are inactive', async () => {
      const doomed = await createAgent(t.db, tenant.id);
      const cfg = await discoverAs(t.baseUrl, doomed);
      const tok = await agentToken(cfg);
      expect((await client.tokenIntrospection(config, tok)).active).toBe(true);
      // what DELETE does (spec 3.2): revoked_at, a denylist entry, then the cache
      await t.db.query(`UPDATE agent_clients SET revoked_at = now() WHERE id = $1`, [doomed.id]);
      await t.db.query(`INSERT INTO agent_denylist (tenant_id, agent_client_id, reason, expires_at) VALUES ($1, $2, 'agent_revoked', now() + interval '15 minutes')`, [tenant.id, doomed.id]);
      await t.app.get(AgentDenylistService).cacheAfterCommit(doomed.id);
      expect(await client.tokenIntrospection(config, tok)).toEqual({ active: false });
    });

    it('a revoked (agent, user) pair: inactive, and a restore does not bring back a token the withdrawal ended; tokens issued after the restore are active', async () => {
      const u = await registerUser(t, tenant);
      const tok = await agentToken(config, u);
      expect((await client.tokenIntrospection(config, tok)).active).toBe(true);
      await t.http().delete(`/v1/users/me/agents/${agent.id}`).set('Authorization', `Bearer ${u.access_token}`).expect(200);
      expect(await client.tokenIntrospection(config, tok)).toEqual({ active: false });
      await t.http().post(`/v1/users/me/agents/${agent.id}/restore`).set('Authorization', `Bearer ${u.access_token}`).expect(200);
      expect(await client.tokenIntrospection(config, tok)).toEqual({ active: false });
      // iat has whole seconds: the restore answers once its second is over, so a token the agent
      // gets right after it is told apart from those the withdrawal ended
      const after = await agentToken(config, u);
      expect((await client.tokenIntrospection(config, after)).active).toBe(true);
    });

    it('an exchange whose token was signed before a restore that committed ahead of its issuing statement issues nothing (never a token introspection calls inactive)', async () => {
      const u = await registerUser(t, tenant);
      await t.http().delete(`/v1/users/me/agents/${agent.id}`).set('Authorization', `Bearer ${u.access_token}`).expect(200);
      await t.http().post(`/v1/users/me/agents/${agent.id}/restore`).set('Authorization', `Bearer ${u.access_token}`).expect(200);
      // the restore's second at or after the iat of the token being issued: what a restore
      // committing between the exchange's signing and its issuing statement leaves
      await t.db.query(`UPDATE agent_user_revocations SET restored_at = now() + interval '30 seconds' WHERE user_id = $1 AND agent_client_id = $2`, [u.id, agent.id]);
      const subjectToken = (await login(t, tenant, u.email)).access_token;
      // nothing wrong with the request: to be sent again a second later
      const refused = await postToken(t, agent, exchangeBody(subjectToken)).expect(503);
      expect([refused.body.error, refused.headers['retry-after']]).toEqual(['temporarily_unavailable', '1']);
      const issued = await t.db.query(`SELECT 1 FROM audit_events WHERE type = 'oauth.token_exchange.issued' AND target_id = $1`, [u.id]);
      expect(issued).toHaveLength(0);
      // once the restore is behind the token's second, the agent gets tokens, and they are active
      await t.db.query(`UPDATE agent_user_revocations SET restored_at = now() - interval '2 seconds' WHERE user_id = $1 AND agent_client_id = $2`, [u.id, agent.id]);
      const tok = (await exchange(config, subjectToken)).access_token;
      expect((await client.tokenIntrospection(config, tok)).active).toBe(true);
    });

    it('an ended session: the user token is inactive (also when only PostgreSQL knows)', async () => {
      const s1 = await session();
      await t.http().post('/v1/auth/logout').set('Authorization', `Bearer ${s1.access_token}`).expect(204);
      expect((await introspectWithKey(s1.access_token).expect(200)).body).toEqual({ active: false });
      const s2 = await session();
      await t.db.query(`UPDATE user_sessions SET revoked_at = now() WHERE id = $1`, [claims(s2.access_token).sid]);
      expect((await introspectWithKey(s2.access_token).expect(200)).body).toEqual({ active: false });
    });

    it('the caller must authenticate: none, wrong secret, public client, bad API key: 401 invalid_client; both methods: invalid_request', async () => {
      const tok = await agentToken();
      const none = await t.http().post('/oauth/introspect').type('form').send({ token: tok });
      expect(none.status).toBe(401);
      expect(none.body.error).toBe('invalid_client');
      expect(await oauthFailure(client.tokenIntrospection(await discoverAs(t.baseUrl, { id: agent.id, secret: 'wrong' }), tok))).toMatchObject({ status: 401, error: 'invalid_client' });
      const pub = await createOAuthClient(t.db, tenant.id, 'public');
      const publicClient = await t.http().post('/oauth/introspect').type('form').send({ token: tok, client_id: pub.id });
      const badKey = await introspectWithKey(tok, 'authp_nope');
      // every 401 carries a challenge (RFC 9110 section 15.5.2), whatever the credentials tried
      for (const res of [none, publicClient, badKey]) {
        expect(res.status).toBe(401);
        expect(res.headers['www-authenticate']).toMatch(/^Basic realm="oauth"/);
      }
      const both = await t.http().post('/oauth/introspect').type('form').set('X-API-Key', tenant.apiKey).set('Authorization', basic(agent.id, agent.secret)).send({ token: tok });
      expect(both.status).toBe(400);
      expect(both.body.error).toBe('invalid_request');
      const withSecret = await t.http().post('/oauth/introspect').type('form').set('X-API-Key', tenant.apiKey).send({ token: tok, client_id: agent.id, client_secret: agent.secret });
      expect([withSecret.status, withSecret.body.error]).toEqual([400, 'invalid_request']);
    });

    it('X-API-Key with a bare client_id in the body (what oauth4webapi and openid-client always send) is the API key\'s call', async () => {
      const s = await session();
      for (const clientId of [agent.id, 'anything']) {
        const res = await t.http().post('/oauth/introspect').type('form').set('X-API-Key', tenant.apiKey).send({ token: s.access_token, client_id: clientId }).expect(200);
        expect(res.body).toMatchObject({ active: true, sub: expect.any(String) });
      }
      await t.http().post('/oauth/revoke').type('form').set('X-API-Key', tenant.apiKey).send({ token: s.access_token, client_id: 'anything' }).expect(200);
      await me(s.access_token).expect(401);
    });

    it('token is required; JSON is refused', async () => {
      const miss = await t.http().post('/oauth/introspect').type('form').set('Authorization', basic(agent.id, agent.secret)).send({ token_type_hint: 'access_token' });
      expect(miss.status).toBe(400);
      expect(miss.body.error).toBe('invalid_request');
      const json = await t.http().post('/oauth/introspect').set('Authorization', basic(agent.id, agent.secret)).send({ token: 'x' });
      expect(json.status).toBe(400);
      expect(json.body.error).toBe('invalid_request');
    });
  });

  describe('revocation', () => {
    it('an agent revokes its own token (openid-client): bearer calls get 401 token_revoked, introspection inactive, audited', async () => {
      const tok = await agentToken();
      await me(tok).expect(200);
      await client.tokenRevocation(config, tok);
      const res = await me(tok).expect(401);
      expect(res.headers['www-authenticate']).toContain('token_revoked');
      expect(await client.tokenIntrospection(config, tok)).toEqual({ active: false });
      const jti = claims(tok).jti as string;
      const [row] = await t.db.query<{ metadata: Record<string, unknown> }>(`SELECT metadata FROM audit_events WHERE type = 'oauth.token_revoked' AND metadata->>'jti_hash_prefix' = $1`, [hashPrefix(jti)]);
      expect(row.metadata).toMatchObject({ token_type: 'access_token', agent_client_id: agent.id });
      expect(JSON.stringify(row.metadata)).not.toContain(jti);
      expect(await t.db.query(`SELECT 1 FROM agent_actions WHERE agent_client_id = $1 AND action = 'token_revoked' AND jti = $2`, [agent.id, jti])).toHaveLength(1);
      // repeat: still 200
      await client.tokenRevocation(config, tok);
    });

    it('revoking a token again, or in parallel, answers 200 each time and records the revocation once', async () => {
      const tok = await agentToken();
      const jti = claims(tok).jti as string;
      const revokeOnce = () => t.http().post('/oauth/revoke').type('form').set('Authorization', basic(agent.id, agent.secret)).send({ token: tok });
      for (const r of await Promise.all(Array.from({ length: 6 }, revokeOnce))) expect(r.status).toBe(200);
      await revokeOnce().expect(200);
      await t.http().post('/oauth/revoke').type('form').set('X-API-Key', tenant.apiKey).send({ token: tok }).expect(200);
      await me(tok).expect(401);
      expect(await t.db.query(`SELECT 1 FROM audit_events WHERE type = 'oauth.token_revoked' AND metadata->>'jti_hash_prefix' = $1`, [hashPrefix(jti)])).toHaveLength(1);
      expect(await t.db.query(`SELECT 1 FROM agent_actions WHERE agent_client_id = $1 AND action = 'token_revoked' AND jti = $2`, [agent.id, jti])).toHaveLength(1);
    });

    it("another agent may not revoke it (unauthorized_client); the tenant's API key may", async () => {
      const tok = await agentToken();
      const other = await createAgent(t.db, tenant.id);
      expect(await oauthFailure(client.tokenRevocation(await discoverAs(t.baseUrl, other), tok))).toMatchObject({ status: 400, error: 'unauthorized_client' });
      await me(tok).expect(200);
      await t.http().post('/oauth/revoke').type('form').set('X-API-Key', tenant.apiKey).send({ token: tok, token_type_hint: 'access_token' }).expect(200);
      await me(tok).expect(401);
    });

    it('unknown, invalid and other-tenant tokens answer 200 and change nothing (RFC 7009 section 2.2)', async () => {
      const other = await createTenant(t.db, { tier: 'pro' });
      const otherAgent = await createAgent(t.db, other.id);
      const tok = await agentToken();
      for (const bad of ['nope', `${tok.slice(0, -4)}AAAA`, '00000000-0000-4000-8000-000000000000:' + 'A'.repeat(43), junkWithOurKid()]) {
        const res = await t.http().post('/oauth/revoke').type('form').set('Authorization', basic(agent.id, agent.secret)).send({ token: bad });
        expect(res.status).toBe(200);
        expect(res.headers['cache-control']).toBe('no-store');
      }
      await client.tokenRevocation(await discoverAs(t.baseUrl, otherAgent), tok);
      await me(tok).expect(200);
    });

    it("the tenant's API key revokes a user access token: refused by bearer calls and as a subject token", async () => {
      const s = await session();
      await t.http().post('/oauth/revoke').type('form').set('X-API-Key', tenant.apiKey).send({ token: s.access_token }).expect(200);
      await me(s.access_token).expect(401);
      const res = await postToken(t, agent, exchangeBody(s.access_token)).expect(400);
      expect(res.body).toEqual({ error: 'invalid_grant', error_description: 'Subject token revoked' });
      const [row] = await t.db.query<{ metadata: Record<string, unknown> }>(
        `SELECT metadata FROM audit_events WHERE type = 'oauth.token_exchange.subject_invalid' AND metadata->>'subject_token_jti_hash_prefix' = $1`,
        [hashPrefix(claims(s.access_token).jti as string)],
      );
      expect(row.metadata.subject_invalid_reason).toBe('token_revoked');
      // an agent client may not revoke user tokens
      const s2 = await session();
      expect(await oauthFailure(client.tokenRevocation(config, s2.access_token))).toMatchObject({ status: 400, error: 'unauthorized_client' });
    });

    it("the tenant's API key revokes an MFA enrollment-only token: TOTP setup refuses it from then on; an agent may not (review: 200 without revoking)", async () => {
      const enforced = await createTenant(t.db, { tier: 'pro' });
      const u = await registerUser(t, enforced);
      await t.db.query(`UPDATE tenants SET mfa_policy = 'required', mfa_required_since = now() - interval '30 days', mfa_grace_period_days = 3 WHERE id = $1`, [enforced.id]);
      await t.db.query(`UPDATE users SET created_at = now() - interval '30 days' WHERE id = $1`, [u.id]);
      await t.tenantChanged(enforced.id);
      const enrollment = async () =>
        (await t.http().post('/v1/auth/login').set('X-API-Key', enforced.apiKey).set('X-Forwarded-For', randomIp()).send({ email: u.email, password: STRONG_PASSWORD }).expect(403)).body
          .enrollment_token as string;
      const setup = (tok: string) => t.http().post('/v1/auth/mfa/totp/setup').set('Authorization', `Bearer ${tok}`).send();
      const tok = await enrollment();
      // another tenant's key: not a token of its tenant (200, nothing revoked)
      await t.http().post('/oauth/revoke').type('form').set('X-API-Key', tenant.apiKey).send({ token: tok }).expect(200);
      await setup(tok).expect(200);
      await t.http().post('/oauth/revoke').type('form').set('X-API-Key', enforced.apiKey).send({ token: tok }).expect(200);
      expect(await t.db.query(`SELECT 1 FROM revoked_access_tokens WHERE jti = $1`, [claims(tok).jti])).toHaveLength(1);
      expect((await setup(tok).expect(401)).headers['www-authenticate']).toContain('invalid_token');
      expect(await t.db.query(`SELECT 1 FROM audit_events WHERE type = 'oauth.token_revoked' AND target_id = $1`, [u.id])).toHaveLength(1);
      // still not a token introspection calls active (no resource server's token)
      expect((await introspectWithKey(await enrollment(), enforced.apiKey).expect(200)).body).toEqual({ active: false });
      // an agent client may not revoke it
      const other = await enrollment();
      const enforcedAgent = await createAgent(t.db, enforced.id);
      const cfg = await discoverAs(t.baseUrl, enforcedAgent);
      expect(await oauthFailure(client.tokenRevocation(cfg, other))).toMatchObject({ status: 400, error: 'unauthorized_client' });
      await setup(other).expect(200);
    });

    it("the tenant's API key revokes a refresh token: the session ends (refresh fails, its access token is no subject token)", async () => {
      const s = await session();
      await t.http().post('/oauth/revoke').type('form').set('X-API-Key', tenant.apiKey).send({ token: s.refresh_token, token_type_hint: 'refresh_token' }).expect(200);
      await t.http().post('/v1/auth/refresh').set('X-API-Key', tenant.apiKey).send({ refresh_token: s.refresh_token }).expect(401);
      expect((await postToken(t, agent, exchangeBody(s.access_token)).expect(400)).body.error_description).toBe('Subject token revoked');
      // an agent client presenting a user's refresh token is refused and the session stays
      const s2 = await session();
      expect(await oauthFailure(client.tokenRevocation(config, s2.refresh_token))).toMatchObject({ status: 400, error: 'unauthorized_client' });
      await t.http().post('/v1/auth/refresh').set('X-API-Key', tenant.apiKey).send({ refresh_token: s2.refresh_token }).expect(200);
    });

    it('revoked access tokens stay revoked when Redis loses its keys (PostgreSQL is the source of truth); live ones stay live', async () => {
      const agentTok = await agentToken();
      const s = await session();
      const live = await agentToken();
      await me(agentTok).expect(200);
      await client.tokenRevocation(config, agentTok);
      await t.http().post('/oauth/revoke').type('form').set('X-API-Key', tenant.apiKey).send({ token: s.access_token }).expect(200);
      const [stored] = await t.db.query<{ n: string }>(`SELECT count(*)::text AS n FROM revoked_access_tokens WHERE jti = ANY($1)`, [[claims(agentTok).jti, claims(s.access_token).jti]]);
      expect(stored.n).toBe('2');
      const redis = rawRedis();
      try {
        expect(await flushTestPrefix(redis)).toBeGreaterThan(0);
      } finally {
        redis.disconnect();
      }
      expect((await me(agentTok).expect(401)).headers['www-authenticate']).toContain('token_revoked');
      expect(await client.tokenIntrospection(config, agentTok)).toEqual({ active: false });
      await me(s.access_token).expect(401);
      expect((await postToken(t, agent, exchangeBody(s.access_token)).expect(400)).body.error_description).toBe('Subject token revoked');
      // a token nobody revoked is read from PostgreSQL once and served as before
      await me(live).expect(200);
      expect((await client.tokenIntrospection(config, live)).active).toBe(true);
    });

    it('a tenant without revoked tokens: a new token is checked without a per-token read; one revocation makes every token of the tenant checked again', async () => {
      const other = await createTenant(t.db, { tier: 'pro' });
      const u = await registerUser(t, other);
      const prefix = process.env.REDIS_KEY_PREFIX as string;
      const redis = rawRedis();
      try {
        const a = await login(t, other, u.email);
        await me(a.access_token).expect(200);
        // the tenant's answer is cached ("none"); the token's own slot was never needed
        expect(await redis.get(`${prefix}revoked:jti-tenant:${other.id}`)).toBe('0');
        expect(await redis.exists(`${prefix}revoked:jti:${claims(a.access_token).jti}`)).toBe(0);
        // the next new token of the tenant: answered by the cached "none", no per-token read either
        const c = await login(t, other, u.email);
        await me(c.access_token).expect(200);
        expect(await redis.exists(`${prefix}revoked:jti:${claims(c.access_token).jti}`)).toBe(0);

        const b = await login(t, other, u.email);
        await t.http().post('/oauth/revoke').type('form').set('X-API-Key', other.apiKey).send({ token: b.access_token }).expect(200);
        expect(await redis.get(`${prefix}revoked:jti-tenant:${other.id}`)).toBe('1');
        // the revoked token's own slot is lost (eviction): the tenant's answer sends the guard to PostgreSQL
        await redis.del(`${prefix}revoked:jti:${claims(b.access_token).jti}`);
        expect((await me(b.access_token).expect(401)).headers['www-authenticate']).toContain('token_revoked');
        expect((await introspectWithKey(b.access_token, other.apiKey).expect(200)).body).toEqual({ active: false });
        // the other tokens of the tenant are read once each, and stay live
        await me(a.access_token).expect(200);
        expect(await redis.get(`${prefix}revoked:jti:${claims(a.access_token).jti}`)).toBe('0');
      } finally {
        redis.disconnect();
      }
    });

    it('needs client authentication and a token', async () => {
      const none = await t.http().post('/oauth/revoke').type('form').send({ token: 'x' });
      expect(none.status).toBe(401);
      expect(none.body.error).toBe('invalid_client');
      const miss = await t.http().post('/oauth/revoke').type('form').set('Authorization', basic(agent.id, agent.secret)).send({});
      expect(miss.status).toBe(400);
      expect(miss.body.error).toBe('invalid_request');
    });
  });
});

describe('discovery documents (RFC 8414, OpenID Discovery)', () => {
  let t: ListeningApp;
  beforeAll(async () => {
    t = await startListeningApp();
  });
  afterAll(() => t.close());

  it.each(['/.well-known/openid-configuration', '/.well-known/oauth-authorization-server'])('%s lists the token, introspection and revocation endpoints', async (path) => {
    const res = await t.http().get(path).expect(200);
    expect(res.body).toMatchObject({
      issuer: t.baseUrl,
      token_endpoint: `${t.baseUrl}/oauth/token`,
      introspection_endpoint: `${t.baseUrl}/oauth/introspect`,
      revocation_endpoint: `${t.baseUrl}/oauth/revoke`,
      jwks_uri: `${t.baseUrl}/.well-known/jwks.json`,
    });
    expect(res.body.grant_types_supported).toContain('urn:ietf:params:oauth:grant-type:token-exchange');
    expect(res.body.token_endpoint_auth_methods_supported).toEqual(expect.arrayContaining(['client_secret_basic', 'client_secret_post']));
    expect(res.body.token_endpoint_auth_methods_supported).not.toContain('none');
  });

  it('claims_supported lists every claim our tokens carry (a sign-in token, a step-up token, the MFA enrollment claims)', async () => {
    const listed: string[] = (await t.http().get('/.well-known/openid-configuration').expect(200)).body.claims_supported;
    const tenant = await createTenant(t.db);
    const u = await registerUser(t, tenant);
    const stepped = await t.http().post('/v1/auth/step-up/password').set('Authorization', `Bearer ${u.access_token}`).send({ password: STRONG_PASSWORD }).expect(200);
    for (const token of [u.access_token, stepped.body.access_token]) expect(listed).toEqual(expect.arrayContaining(Object.keys(claims(token))));
    expect(listed).toEqual(expect.arrayContaining(['step_up_at', 'mfa_enrollment_required', 'mfa_enrollment_deadline', 'mfa_enrollment_only', 'act', 'subject_sid']));
  });

  it('openid-client discovers both documents', async () => {
    for (const algorithm of ['oidc', 'oauth2'] as const) {
      const cfg = await client.discovery(new URL(t.baseUrl), 'x', undefined, client.ClientSecretBasic('y'), { execute: [client.allowInsecureRequests], algorithm });
      const m = cfg.serverMetadata();
      expect(m.token_endpoint).toBe(`${t.baseUrl}/oauth/token`);
      expect(m.introspection_endpoint).toBe(`${t.baseUrl}/oauth/introspect`);
      expect(m.revocation_endpoint).toBe(`${t.baseUrl}/oauth/revoke`);
    }
  });
});
