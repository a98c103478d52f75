import { generateKeyPairSync, randomUUID } from 'crypto';
import * as jwt from 'jsonwebtoken';
import * as client from 'openid-client';
import * as oauth from 'oauth4webapi';
import { JwtService, peekJwt } from '../../../src/shared/crypto/jwt.service';
import { SigningKeysService } from '../../../src/shared/crypto/signing-keys.service';
import { hashPrefix } from '../../../src/shared/crypto/tokens';
import { AgentFixture, createAgent, createOAuthClient } from '../../factories/agent.factory';
import { createTenant, TenantFixture } from '../../factories/tenant.factory';
import { randomIp, STRONG_PASSWORD } from '../../setup/app';
import { TokenRevocationService } from '../../../src/shared/auth/token-revocation.service';
import { expectedClientHash, plainSha256Prefix } from '../../setup/client-hash';
import {
  ACCESS_TOKEN_TYPE,
  auditRows,
  basic,
  claims,
  discoverAs,
  exchange,
  ListeningApp,
  login,
  oauthFailure,
  postToken,
  exchangeBody,
  registerUser,
  RegisteredUser,
  startListeningApp,
  TOKEN_EXCHANGE,
} from './oauth-helpers';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

describe('POST /oauth/token: RFC 8693 token exchange through openid-client (spec 4.3, 5, 6, 7.5, 8)', () => {
  let t: ListeningApp;
  let tenant: TenantFixture;
  let agent: AgentFixture;
  let user: RegisteredUser;
  let config: client.Configuration;

  beforeAll(async () => {
    t = await startListeningApp();
    tenant = await createTenant(t.db, { tier: 'pro' });
    // limits are tested in limits.e2e-spec.ts; this file makes many exchanges with one agent
    agent = await createAgent(t.db, tenant.id, { rate_limits: { token_exchange_per_min: 600 } });
    user = await registerUser(t, tenant);
    config = await discoverAs(t.baseUrl, agent);
  });
  afterAll(() => t.close());

  /** A fresh subject token of `user` (new session, new jti: the per-jti limit stays out of the way). */
  const subject = async (u: RegisteredUser = user) => (await login(t, tenant, u.email)).access_token;
  const sign = async (extra: Record<string, unknown>, ttl?: number) =>
    (await t.app.get(JwtService).sign(
      { sub: user.id, tenant_id: tenant.id, sid: randomUUID(), scope: 'openid profile email', amr: ['pwd'], aal: 'AAL1', role: 'member', is_anonymous: false, ...extra } as never,
      ttl,
    )).token;

  describe('success', () => {
    it('issues an agent token (client_secret_basic): the contract claims, no refresh or id token', async () => {
      const st = await subject();
      const res = await exchange(config, st);
      expect(Object.keys(res).sort()).toEqual(['access_token', 'expires_in', 'issued_token_type', 'scope', 'token_type']);
      expect(res).toMatchObject({ issued_token_type: ACCESS_TOKEN_TYPE, expires_in: 300, scope: 'openid profile email' });
      expect(res.token_type.toLowerCase()).toBe('bearer');
      const c = claims(res.access_token);
      const s = claims(st);
      expect(c).toMatchObject({
        iss: t.baseUrl,
        aud: t.baseUrl,
        sub: user.id,
        tenant_id: tenant.id,
        act: { sub: agent.id },
        // RFC 9068 section 2.2, RFC 8693 section 4.3: the client the token was issued to
        client_id: agent.id,
        scope: 'openid profile email',
        aal: 'AAL1',
        role: 'member',
        is_anonymous: false,
      });
      expect(JSON.parse(Buffer.from(res.access_token.split('.')[0], 'base64url').toString())).toEqual({ alg: 'RS256', typ: 'at+jwt', kid: expect.any(String) });
      expect(c.amr).toEqual([...(s.amr as string[]), 'tx']);
      // when the user authenticated: the subject's (OIDC auth_time)
      expect(typeof s.auth_time).toBe('number');
      expect(c.auth_time).toBe(s.auth_time);
      expect(c).not.toHaveProperty('sid');
      expect(c).not.toHaveProperty('email');
      expect(c.jti).toMatch(UUID);
      expect(c.jti).not.toBe(s.jti);
      expect((c.exp as number) - (c.iat as number)).toBe(300);
      // the agent token works on a bearer endpoint and names the user
      const me = await t.http().get('/v1/auth/me').set('Authorization', `Bearer ${res.access_token}`).expect(200);
      expect(me.body.id).toBe(user.id);
      // a resource server with a standard RFC 9068 validator accepts both the agent's token and the user's (client_id: the tenant)
      const as: oauth.AuthorizationServer = { issuer: t.baseUrl, jwks_uri: `${t.baseUrl}/.well-known/jwks.json` };
      const validate = (token: string) =>
        oauth.validateJwtAccessToken(as, new Request(`${t.baseUrl}/r`, { headers: { authorization: `Bearer ${token}` } }), t.baseUrl, { [oauth.allowInsecureRequests]: true });
      await expect(validate(res.access_token)).resolves.toMatchObject({ sub: user.id, client_id: agent.id, act: { sub: agent.id } });
      await expect(validate(st)).resolves.toMatchObject({ sub: user.id, client_id: tenant.id });
    });

    it('answers with Cache-Control: no-store and Pragma: no-cache (RFC 6749 section 5.1)', async () => {
      const res = await postToken(t, agent, exchangeBody(await subject())).expect(200);
      expect(res.headers['cache-control']).toBe('no-store');
      expect(res.headers.pragma).toBe('no-cache');
      expect(res.headers['content-type']).toMatch(/^application\/json/);
      expect(res.body).not.toHaveProperty('refresh_token');
      expect(res.body).not.toHaveProperty('id_token');
      expect(res.body.token_type).toBe('Bearer');
    });

    it('accepts client_secret_post (client_id and client_secret in the body)', async () => {
      const post = await discoverAs(t.baseUrl, agent, 'post');
      const res = await exchange(post, await subject());
      expect(claims(res.access_token).act).toEqual({ sub: agent.id });
    });

    it('records the audit event, the webhook and the activity row in one go, with hash prefixes only', async () => {
      const st = await subject();
      const res = await exchange(config, st);
      const c = claims(res.access_token);
      const s = claims(st);
      const [a] = await t.db.query<{ metadata: Record<string, unknown>; actor_type: string; actor_id: string; target_id: string }>(
        `SELECT metadata, actor_type, actor_id, target_id FROM audit_events WHERE type = 'oauth.token_exchange.issued' AND metadata->>'jti_hash_prefix' = $1`,
        [hashPrefix(c.jti as string)],
      );
      expect(a).toMatchObject({ actor_type: 'agent', actor_id: agent.id, target_id: user.id });
      expect(a.metadata).toMatchObject({
        agent_client_id: agent.id,
        subject_token_jti_hash_prefix: hashPrefix(s.jti as string),
        scope: 'openid profile email',
        expires_at: new Date((c.exp as number) * 1000).toISOString(),
      });
      const raw = JSON.stringify(a.metadata);
      for (const secret of [st, res.access_token, s.jti as string, c.jti as string]) expect(raw).not.toContain(secret);
      const [o] = await t.db.query<{ topic: string; payload: Record<string, unknown> }>(
        `SELECT topic, payload FROM outbox WHERE event_type = 'oauth.token_exchange.issued' AND payload->>'jti_hash_prefix' = $1`,
        [hashPrefix(c.jti as string)],
      );
      expect(o.topic).toBe('webhook');
      expect(o.payload).toMatchObject({ agent_client_id: agent.id, user_id: user.id, scope: 'openid profile email', expires_at: new Date((c.exp as number) * 1000).toISOString() });
      expect(JSON.stringify(o.payload)).not.toContain(res.access_token);
      const [x] = await t.db.query<{ action: string; actor_user_id: string; scope_used: string; ip_hash_prefix: string; user_agent_hash_prefix: string | null }>(
        `SELECT action, actor_user_id, scope_used, ip_hash_prefix, user_agent_hash_prefix FROM agent_actions WHERE agent_client_id = $1 AND jti = $2`,
        [agent.id, c.jti],
      );
      expect(x).toMatchObject({ action: 'token_exchange', actor_user_id: user.id, scope_used: 'openid profile email' });
      expect(x.ip_hash_prefix).toMatch(/^[0-9a-f]{12}$/);
    });

    it('reduces the client IP and user agent to keyed hash prefixes (HMAC, 12 hex), equal for equal inputs, never the plain SHA-256', async () => {
      const ip = '198.51.100.23';
      const ua = 'agent-sdk/2.1 (+https://agent.example)';
      const jtis: string[] = [];
      for (let i = 0; i < 2; i++) {
        const res = await postToken(t, agent, exchangeBody(await subject())).set('X-Forwarded-For', ip).set('User-Agent', ua).expect(200);
        jtis.push(claims(res.body.access_token).jti as string);
      }
      const actions = await t.db.query<{ ip_hash_prefix: string; user_agent_hash_prefix: string }>(
        `SELECT ip_hash_prefix, user_agent_hash_prefix FROM agent_actions WHERE agent_client_id = $1 AND jti = ANY ($2) ORDER BY created_at`,
        [agent.id, jtis],
      );
      const audits = await t.db.query<{ metadata: Record<string, unknown> }>(
        `SELECT metadata FROM audit_events WHERE type = 'oauth.token_exchange.issued' AND metadata->>'jti_hash_prefix' = ANY ($1)`,
        [jtis.map((j) => hashPrefix(j))],
      );
      expect(actions).toHaveLength(2);
      expect(audits).toHaveLength(2);
      for (const row of [...actions, ...audits.map((a) => a.metadata)]) {
        expect(row.ip_hash_prefix).toMatch(/^[0-9a-f]{12}$/);
        expect(row.ip_hash_prefix).toBe(expectedClientHash(ip));
        expect(row.ip_hash_prefix).not.toBe(plainSha256Prefix(ip));
      }
      for (const row of actions) {
        expect(row.user_agent_hash_prefix).toBe(expectedClientHash(ua));
        expect(row.user_agent_hash_prefix).not.toBe(plainSha256Prefix(ua));
      }
      // another address gets another prefix
      const other = await postToken(t, agent, exchangeBody(await subject())).set('X-Forwarded-For', '198.51.100.24').expect(200);
      const [o] = await t.db.query<{ ip_hash_prefix: string }>(`SELECT ip_hash_prefix FROM agent_actions WHERE jti = $1`, [claims(other.body.access_token).jti]);
      expect(o.ip_hash_prefix).toBe(expectedClientHash('198.51.100.24'));
      expect(o.ip_hash_prefix).not.toBe(actions[0].ip_hash_prefix);
    });
  });

  describe('scope: requested ∩ subject token scope ∩ agent allowlist', () => {
    let narrow: AgentFixture;
    let narrowConfig: client.Configuration;
    beforeAll(async () => {
      narrow = await createAgent(t.db, tenant.id, { scopes: ['openid', 'email', 'orders:read'] });
      narrowConfig = await discoverAs(t.baseUrl, narrow);
    });

    it('defaults to the subject scope narrowed by the allowlist', async () => {
      const res = await exchange(narrowConfig, await subject());
      expect(res.scope).toBe('openid email');
      expect(claims(res.access_token).scope).toBe('openid email');
    });

    it('drops requested scopes the subject or the agent does not have', async () => {
      const res = await exchange(narrowConfig, await subject(), { scope: 'email orders:read profile admin' });
      expect(res.scope).toBe('email');
    });

    it('an empty intersection is invalid_scope and audits scope_denied', async () => {
      const st = await subject();
      const f = await oauthFailure(exchange(narrowConfig, st, { scope: 'orders:read admin' }));
      expect(f).toMatchObject({ status: 400, error: 'invalid_scope' });
      const [row] = await auditRows(t, 'oauth.token_exchange.scope_denied', narrow.id);
      expect(row.metadata).toMatchObject({ agent_client_id: narrow.id, subject_token_jti_hash_prefix: hashPrefix(claims(st).jti as string), requested_scope: 'orders:read admin' });
      const none = await createAgent(t.db, tenant.id, { scopes: [] });
      expect(await oauthFailure(exchange(await discoverAs(t.baseUrl, none), await subject()))).toMatchObject({ status: 400, error: 'invalid_scope' });
    });

    it('authp_token_exchange_total counts each exchange by outcome: issued, or the spec 6 refusal', async () => {
      const count = async (outcome: string) =>
        Number((await t.http().get('/metrics').expect(200)).text.split('\n').find((l) => l.startsWith(`authp_token_exchange_total{outcome="${outcome}"} `))?.split(' ').pop() ?? 0);
      const outcomes = ['issued', 'scope_denied', 'subject_invalid', 'client_invalid'];
      const before = await Promise.all(outcomes.map(count));
      await postToken(t, agent, exchangeBody(await subject())).expect(200);
      await postToken(t, narrow, exchangeBody(await subject(), { scope: 'orders:read admin' })).expect(400);
      await postToken(t, agent, exchangeBody('not.a.token')).expect(400);
      await postToken(t, { id: agent.id, secret: 'wrong-secret' }, exchangeBody(await subject())).expect(401);
      expect(await Promise.all(outcomes.map(count))).toEqual(before.map((n) => n + 1));
    });

    it('a malformed scope is invalid_scope', async () => {
      expect((await postToken(t, agent, exchangeBody(await subject(), { scope: 'openid "quoted"' })).expect(400)).body.error).toBe('invalid_scope');
    });

    it('a scope of more than 100 distinct tokens is invalid_scope, recorded nowhere; one of 100 refused is audited without its repeats (bounded, not as long as the body)', async () => {
      const before = (await auditRows(t, 'oauth.token_exchange.scope_denied', narrow.id)).length;
      const many = Array.from({ length: 101 }, (_, i) => `x${i}:${'s'.repeat(190)}`);
      const res = await postToken(t, narrow, exchangeBody(await subject(), { scope: many.join(' ') })).expect(400);
      expect(res.body).toMatchObject({ error: 'invalid_scope', error_description: 'The scope parameter names more than 100 scopes' });
      expect(await auditRows(t, 'oauth.token_exchange.scope_denied', narrow.id)).toHaveLength(before);
      // 100 distinct, each named four times (a 78 KB body): refused as not grantable, recorded once each
      const hundred = many.slice(0, 100);
      const repeated = [...hundred, ...hundred, ...hundred, ...hundred].join(' ');
      expect((await postToken(t, narrow, exchangeBody(await subject(), { scope: repeated })).expect(400)).body.error).toBe('invalid_scope');
      const rows = await auditRows(t, 'oauth.token_exchange.scope_denied', narrow.id);
      expect(rows).toHaveLength(before + 1);
      expect(rows.map((r) => r.metadata.requested_scope)).toContain(hundred.join(' '));
    });
  });

  describe('lifetime: min(requested or 300, agent maximum, 900)', () => {
    it('caps by the agent maximum', async () => {
      const short = await createAgent(t.db, tenant.id, { agent_token_max_ttl_sec: 120 });
      const res = await exchange(await discoverAs(t.baseUrl, short), await subject());
      expect(res.expires_in).toBe(120);
      const c = claims(res.access_token);
      expect((c.exp as number) - (c.iat as number)).toBe(120);
    });

    it('honours a shorter requested lifetime and never exceeds 900', async () => {
      expect((await exchange(config, await subject(), { expires_in: '60' })).expires_in).toBe(60);
      const long = await exchange(config, await subject(), { expires_in: '86400' });
      expect(long.expires_in).toBe(900);
      const c = claims(long.access_token);
      expect((c.exp as number) - (c.iat as number)).toBe(900);
      expect((await postToken(t, agent, exchangeBody(await subject(), { expires_in: '-5' })).expect(400)).body.error).toBe('invalid_request');
    });
  });

  describe("the agent token ends with its subject token's session (subject_sid)", () => {
    const me = (token: string) => t.http().get('/v1/auth/me').set('Authorization', `Bearer ${token}`).set('X-Forwarded-For', randomIp());
    const active = async (token: string) =>
      (await t.http().post('/oauth/introspect').type('form').set('Authorization', basic(agent.id, agent.secret)).send({ token }).expect(200)).body.active as boolean;
    const pair = async (u: RegisteredUser) => {
      const s = await login(t, tenant, u.email);
      const agentToken = (await exchange(config, s.access_token)).access_token;
      return { ...s, agentToken };
    };

    it('carries the session as subject_sid (not sid); a sign-out of that session ends it on every bearer route and at introspection', async () => {
      const u = await registerUser(t, tenant);
      const a = await pair(u);
      const other = await pair(u);
      expect(claims(a.agentToken)).toMatchObject({ subject_sid: claims(a.access_token).sid });
      expect(claims(a.agentToken)).not.toHaveProperty('sid');
      await me(a.agentToken).expect(200);
      // a refresh rotates the session's tokens, it does not end the session
      await t.http().post('/v1/auth/refresh').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', randomIp()).send({ refresh_token: a.refresh_token }).expect(200);
      await me(a.agentToken).expect(200);
      await t.http().post('/v1/auth/logout').set('Authorization', `Bearer ${a.access_token}`).expect(204);
      const refused = await me(a.agentToken).expect(401);
      expect(refused.headers['www-authenticate']).toMatch(/^Bearer error="invalid_token"/);
      expect(await active(a.agentToken)).toBe(false);
      // the user's other session, and the agent token exchanged for its token, go on
      await me(other.agentToken).expect(200);
      expect(await active(other.agentToken)).toBe(true);
    });

    it('sign-out everywhere and a password change end the agent tokens of the sessions they end (the changing session keeps its own)', async () => {
      const u = await registerUser(t, tenant);
      const a = await pair(u);
      const b = await pair(u);
      await t.http().post('/v1/auth/password/change').set('Authorization', `Bearer ${a.access_token}`).set('X-Forwarded-For', randomIp())
        .send({ current_password: STRONG_PASSWORD, new_password: 'another horse battery staple' }).expect(204);
      await me(b.agentToken).expect(401);
      expect(await active(b.agentToken)).toBe(false);
      await me(a.agentToken).expect(200);
      await t.http().post('/v1/auth/logout?scope=global').set('Authorization', `Bearer ${a.access_token}`).expect(204);
      await me(a.agentToken).expect(401);
      expect(await active(a.agentToken)).toBe(false);
    });

    it('PostgreSQL decides when Redis forgot the session: an ended session\'s agent token stays refused after its cached state is gone', async () => {
      const u = await registerUser(t, tenant);
      const a = await pair(u);
      await t.http().post('/v1/auth/logout').set('Authorization', `Bearer ${a.access_token}`).expect(204);
      await t.app.get(TokenRevocationService).forgetSessionMarks([claims(a.access_token).sid as string]);
      await me(a.agentToken).expect(401);
    });
  });

  describe('audience', () => {
    it('is copied into aud; the token belongs to that service, our own bearer endpoints refuse it', async () => {
      const res = await exchange(config, await subject(), { audience: 'https://orders.example.com/api' });
      expect(claims(res.access_token).aud).toBe('https://orders.example.com/api');
      await t.http().get('/v1/auth/me').set('Authorization', `Bearer ${res.access_token}`).expect(401);
    });

    it('may be repeated (RFC 8693 section 2.1); a value that is not an absolute URI is invalid_target', async () => {
      const st = await subject();
      const res = await t.http().post('/oauth/token').type('form').auth(agent.id, agent.secret)
        .send(new URLSearchParams([...Object.entries(exchangeBody(st)), ['audience', 'https://a.example'], ['audience', 'https://b.example']]).toString()).expect(200);
      expect(claims(res.body.access_token).aud).toEqual(['https://a.example', 'https://b.example']);
      expect(await oauthFailure(exchange(config, await subject(), { audience: 'not a uri' }))).toMatchObject({ status: 400, error: 'invalid_target' });
    });

    it.each([
      ['a fragment (an absolute URI has none)', 'https://api.example.com/#frag'],
      ['a malformed percent-encoding', 'https://api.example.com/%ZZ'],
      ['a zero-width space (not ASCII: an IRI, not a URI)', 'https://api\u200b.example.com/'],
      ['a right-to-left override', 'https://api.example.com/\u202egnp.exe'],
      ['a control character', 'https://api.example.com/\u0001'],
      ['a backslash (WHATWG URL parsers read the host as example.com)', 'https://example.com\\@evil.example/'],
      ['no scheme', '//api.example.com/'],
    ])('an audience with %s is invalid_target', async (_what, audience) => {
      expect(await oauthFailure(exchange(config, await subject(), { audience }))).toMatchObject({ status: 400, error: 'invalid_target' });
    });

    it('accepts absolute URIs of the RFC 3986 grammar: a query, percent-encodings, an IP literal, a URN', async () => {
      for (const audience of ['https://api.example.com/v1?tenant=a&x=%2F', 'https://[::1]:8443/api', 'urn:example:orders-api', "https://user@api.example.com/a;b=c/(d)!$'*+,~"]) {
        expect(claims((await exchange(config, await subject(), { audience })).access_token).aud).toBe(audience);
      }
    });
  });

  describe('subject token rejections (spec 4.3): invalid_grant, generic description, precise reason only in the audit record', () => {
    async function expectRejected(st: string, reason: string, description = 'Subject token invalid', a: AgentFixture = agent, cfg: client.Configuration = config) {
      const f = await oauthFailure(exchange(cfg, st));
      expect(f).toEqual(expect.objectContaining({ status: 400, error: 'invalid_grant', error_description: description }));
      const rows = await auditRows(t, 'oauth.token_exchange.subject_invalid', a.id);
      const mine = rows.find((r) => r.metadata.subject_invalid_reason === reason);
      expect(mine).toBeDefined();
      const jti = peekJwt(st)?.payload.jti;
      expect(mine!.metadata).toEqual({
        agent_client_id: a.id,
        subject_invalid_reason: reason,
        subject_token_jti_hash_prefix: jti ? hashPrefix(jti) : null,
      });
      const raw = JSON.stringify(mine!.metadata);
      expect(raw).not.toContain(st);
      if (jti) expect(raw).not.toContain(jti);
      return mine!;
    }

    it('bad signature (another key under our kid) and an unknown kid', async () => {
      const real = await subject();
      const kid = (jwt.decode(real, { complete: true }) as { header: { kid: string } }).header.kid;
      const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
      const forged = jwt.sign(claims(real), privateKey, { algorithm: 'RS256', keyid: kid });
      await expectRejected(forged, 'bad_signature');
      const unknownKid = jwt.sign({ ...claims(real), jti: randomUUID() }, privateKey, { algorithm: 'RS256', keyid: 'nope' });
      await expectRejected(unknownKid, 'bad_signature');
      const [h, p] = real.split('.');
      await expectRejected(`${h}.${p}.${'A'.repeat(342)}`, 'bad_signature');
    });

    it('a token that is not a JWT at all, or one with our kid over a payload that is not JSON', async () => {
      await expectRejected('definitely-not-a-jwt', 'malformed');
      const { kid } = t.app.get(SigningKeysService).signingKey();
      const header = Buffer.from(JSON.stringify({ alg: 'RS256', typ: 'JWT', kid })).toString('base64url');
      await expectRejected(`${header}.${Buffer.from('hello').toString('base64url')}.c2ln`, 'malformed');
    });

    it('wrong issuer, wrong audience, expired', async () => {
      await expectRejected(await sign({ iss: 'https://evil.example' }), 'wrong_issuer');
      await expectRejected(await sign({ aud: 'https://someone-else.example' }), 'wrong_audience');
      await expectRejected(await sign({}, -60), 'expired');
    });

    it('claims a token of ours always has in their shape (scope a string, amr strings), and an iat in the future', async () => {
      await expectRejected(await sign({ scope: undefined }), 'missing_claims');
      await expectRejected(await sign({ scope: ['openid'] }), 'missing_claims');
      await expectRejected(await sign({ amr: 'pwd' }), 'missing_claims');
      await expectRejected(await sign({ amr: ['pwd', 7] }), 'missing_claims');
      // signed with the real key (as only a holder of it could): iat five minutes ahead
      const { kid, key } = t.app.get(SigningKeysService).signingKey();
      const now = Math.floor(Date.now() / 1000);
      const real = claims(await subject());
      const ahead = jwt.sign({ ...real, jti: randomUUID(), iat: now + 300, exp: now + 900 }, key, { algorithm: 'RS256', keyid: kid });
      await expectRejected(ahead, 'not_yet_valid');
      // within the allowed clock skew it is fine
      const skewed = jwt.sign({ ...real, jti: randomUUID(), iat: now + 20, exp: now + 900 }, key, { algorithm: 'RS256', keyid: kid });
      await exchange(config, skewed);
    });

    it("tenant_id not the client's tenant", async () => {
      const other = await createTenant(t.db, { tier: 'pro' });
      const stranger = await registerUser(t, other);
      const row = await expectRejected(stranger.access_token, 'tenant_mismatch');
      // another tenant's user id stays out of this tenant's audit log
      expect(row.target_id).not.toBe(stranger.id);
    });

    it('M2M tokens, tokens already carrying act (no chain delegation), impersonated tokens', async () => {
      await expectRejected(await sign({ m2m: true }), 'm2m_token');
      await expectRejected(await sign({ imp: { sub: randomUUID() } }), 'impersonated_token');
      const agentToken = (await exchange(config, await subject())).access_token;
      await expectRejected(agentToken, 'already_delegated');
    });

    it('anonymous (guest) tokens', async () => {
      await t.db.query(`UPDATE tenants SET anonymous_signins_enabled = true, anonymous_ever_enabled = true WHERE id = $1`, [tenant.id]);
      await t.tenantChanged(tenant.id);
      const g = await t.http().post('/v1/auth/anonymous').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', randomIp()).send({}).expect(201);
      await expectRejected(g.body.access_token, 'anonymous_token');
    });

    it('revoked sessions: after logout, and when only PostgreSQL knows (Redis flushed)', async () => {
      const s1 = await login(t, tenant, user.email);
      await t.http().post('/v1/auth/logout').set('Authorization', `Bearer ${s1.access_token}`).expect(204);
      await expectRejected(s1.access_token, 'session_revoked', 'Subject token revoked');
      const s2 = await login(t, tenant, user.email);
      await t.db.query(`UPDATE user_sessions SET revoked_at = now() WHERE id = $1`, [claims(s2.access_token).sid]);
      await expectRejected(s2.access_token, 'session_revoked', 'Subject token revoked');
      expect(await t.db.query(`SELECT 1 FROM audit_events WHERE type = 'oauth.token_exchange.issued' AND metadata->>'subject_token_jti_hash_prefix' = $1`, [hashPrefix(claims(s2.access_token).jti as string)])).toHaveLength(0);
    });

    it('the (agent, user) pair revoked by the user (spec 3.3), and restored', async () => {
      const mine = await createAgent(t.db, tenant.id);
      const cfg = await discoverAs(t.baseUrl, mine);
      const u = await registerUser(t, tenant);
      await exchange(cfg, u.access_token);
      const st = (await login(t, tenant, u.email)).access_token;
      await t.http().delete(`/v1/users/me/agents/${mine.id}`).set('Authorization', `Bearer ${st}`).expect(200);
      await expectRejected(st, 'agent_revoked_by_user', 'Subject token revoked', mine, cfg);
      // the withdrawal answers first, also when no requested scope could be granted anyway
      const f = await oauthFailure(exchange(cfg, st, { scope: 'admin:everything' }));
      expect(f).toMatchObject({ status: 400, error: 'invalid_grant', error_description: 'Subject token revoked' });
      // nothing was issued for the pair while it was withdrawn
      expect(await t.db.query(`SELECT 1 FROM agent_actions WHERE agent_client_id = $1 AND actor_user_id = $2 AND created_at > now() - interval '1 minute' AND action = 'token_exchange'`, [mine.id, u.id])).toHaveLength(1);
      // other agents of the same user are unaffected
      await exchange(config, st);
      await t.http().post(`/v1/users/me/agents/${mine.id}/restore`).set('Authorization', `Bearer ${st}`).expect(200);
      await exchange(cfg, st);
    });
  });

  describe('client authentication and authorization (spec 5, 7.5)', () => {
    it('a wrong secret is 401 invalid_client, with the Basic challenge whichever method was used (every 401 carries one)', async () => {
      const wrong = { id: agent.id, secret: 'not-the-secret' };
      const basicFail = await oauthFailure(exchange(await discoverAs(t.baseUrl, wrong), await subject()));
      expect(basicFail).toMatchObject({ status: 401, error: 'invalid_client' });
      expect(basicFail.wwwAuthenticate).toMatch(/^Basic /);
      const postFail = await oauthFailure(exchange(await discoverAs(t.baseUrl, wrong, 'post'), await subject()));
      expect(postFail).toMatchObject({ status: 401, error: 'invalid_client' });
      expect(postFail.wwwAuthenticate).toMatch(/^Basic /);
    });

    it('an unknown client, a non-UUID client_id and a revoked agent are invalid_client', async () => {
      for (const creds of [{ id: randomUUID(), secret: agent.secret }, { id: 'agent-007', secret: agent.secret }]) {
        expect(await oauthFailure(exchange(await discoverAs(t.baseUrl, creds), await subject()))).toMatchObject({ status: 401, error: 'invalid_client' });
      }
      const revoked = await createAgent(t.db, tenant.id, { revoked: true });
      expect(await oauthFailure(exchange(await discoverAs(t.baseUrl, revoked), await subject()))).toMatchObject({ status: 401, error: 'invalid_client' });
    });

    it('a disabled agent, a grant type outside its list, a free tenant and non-agent clients are unauthorized_client (audited)', async () => {
      const free = await createTenant(t.db, { tier: 'free' });
      const freeUser = await registerUser(t, free);
      const cases: { agent: { id: string; secret: string }; st: string; reason: string; legacy?: true }[] = [
        { agent: await createAgent(t.db, tenant.id, { disabled: true, grant_types: [] }), st: await subject(), reason: 'client_disabled' },
        { agent: await createAgent(t.db, tenant.id, { grant_types: ['client_credentials'] }), st: await subject(), reason: 'grant_type_not_allowed' },
        // registered with no grant types (never disabled): not a disabled client
        { agent: await createAgent(t.db, tenant.id, { grant_types: [] }), st: await subject(), reason: 'grant_type_not_allowed' },
        { agent: await createAgent(t.db, free.id), st: freeUser.access_token, reason: 'tier_below_pro' },
        { agent: await createOAuthClient(t.db, tenant.id, 'confidential'), st: await subject(), reason: 'not_agent_client', legacy: true },
      ];
      for (const c of cases) {
        const f = await oauthFailure(exchange(await discoverAs(t.baseUrl, c.agent), c.st));
        expect(f).toMatchObject({ status: 400, error: 'unauthorized_client' });
        const [row] = await auditRows(t, 'oauth.token_exchange.client_unauthorized', c.agent.id);
        // spec 6: the subject token's jti hash prefix, although the token is never verified here
        // a legacy OAuth client is no agent: named as oauth_client_id, so no agent-filtered webhook matches it
        const client = c.legacy ? { agent_client_id: null, oauth_client_id: c.agent.id } : { agent_client_id: c.agent.id };
        const metadata = { ...client, reason: c.reason, subject_token_jti_hash_prefix: hashPrefix(claims(c.st).jti as string) };
        expect(row.metadata).toEqual(metadata);
        expect(row.severity).toBe('medium');
        const [hook] = await t.db.query<{ payload: Record<string, unknown> }>(
          `SELECT payload FROM outbox WHERE event_type = 'oauth.token_exchange.client_unauthorized' AND $1 IN (payload->>'agent_client_id', payload->>'oauth_client_id')`,
          [c.agent.id],
        );
        expect(hook.payload).toEqual(metadata);
      }
      // a public client (no secret) fails the confidential gate
      const pub = await createOAuthClient(t.db, tenant.id, 'public');
      const pst = await subject();
      const res = await t.http().post('/oauth/token').type('form').send({ ...exchangeBody(pst), client_id: pub.id }).expect(400);
      expect(res.body.error).toBe('unauthorized_client');
      expect((await auditRows(t, 'oauth.token_exchange.client_unauthorized', pub.id))[0].metadata).toEqual({
        agent_client_id: null,
        oauth_client_id: pub.id,
        reason: 'public_client',
        subject_token_jti_hash_prefix: hashPrefix(claims(pst).jti as string),
      });
    });

    it('a public client id (known from an app) cannot flood the audit log: 60 per minute per client, then 429 slow_down; one event per window', async () => {
      const pub = await createOAuthClient(t.db, tenant.id, 'public');
      const send = () => t.http().post('/oauth/token').type('form').send({ ...exchangeBody('x'), client_id: pub.id });
      const answers = await Promise.all(Array.from({ length: 70 }, send));
      expect(answers.filter((r) => r.status === 400 && r.body.error === 'unauthorized_client')).toHaveLength(60);
      const limited = answers.filter((r) => r.status === 429);
      expect(limited).toHaveLength(10);
      expect(limited[0].body.error).toBe('slow_down');
      expect(Number(limited[0].headers['retry-after'])).toBeGreaterThan(0);
      expect(await auditRows(t, 'oauth.token_exchange.client_unauthorized', pub.id)).toHaveLength(1);
      const [{ n }] = await t.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM outbox WHERE event_type = 'oauth.token_exchange.client_unauthorized' AND payload->>'oauth_client_id' = $1`, [pub.id]);
      expect(n).toBe(1);
      // another client's allowance is its own
      const other = await createOAuthClient(t.db, tenant.id, 'public');
      expect((await t.http().post('/oauth/token').type('form').send({ ...exchangeBody('x'), client_id: other.id }).expect(400)).body.error).toBe('unauthorized_client');
    });

    it('client_unauthorized carries subject_token_jti_hash_prefix null when no jti can be read (absent or not a JWT)', async () => {
      for (const subjectToken of [undefined, 'not-a-jwt']) {
        const disabled = await createAgent(t.db, tenant.id, { disabled: true, grant_types: [] });
        const form: Record<string, string> = { grant_type: TOKEN_EXCHANGE, subject_token_type: ACCESS_TOKEN_TYPE };
        if (subjectToken) form.subject_token = subjectToken;
        expect((await postToken(t, disabled, form).expect(400)).body.error).toBe('unauthorized_client');
        const [row] = await auditRows(t, 'oauth.token_exchange.client_unauthorized', disabled.id);
        expect(row.metadata).toEqual({ agent_client_id: disabled.id, reason: 'client_disabled', subject_token_jti_hash_prefix: null });
      }
    });

    it('an agent on a kill-tokens denylist entry still exchanges (only earlier tokens are killed)', async () => {
      const killed = await createAgent(t.db, tenant.id);
      await t.db.query(
        `INSERT INTO agent_denylist (tenant_id, agent_client_id, reason, not_before, expires_at) VALUES ($1, $2, 'tokens_killed', now() - interval '5 seconds', now() + interval '15 minutes')`,
        [tenant.id, killed.id],
      );
      const res = await exchange(await discoverAs(t.baseUrl, killed), await subject());
      await t.http().get('/v1/auth/me').set('Authorization', `Bearer ${res.access_token}`).expect(200);
    });
  });

  describe('request rejections (spec 4.3, 7.5)', () => {
    it('resource is invalid_target', async () => {
      expect(await oauthFailure(exchange(config, await subject(), { resource: 'https://api.example.com' }))).toMatchObject({ status: 400, error: 'invalid_target' });
    });

    it('actor_token and actor_token_type are invalid_request', async () => {
      const st = await subject();
      expect(await oauthFailure(exchange(config, st, { actor_token: st, actor_token_type: ACCESS_TOKEN_TYPE }))).toMatchObject({ status: 400, error: 'invalid_request' });
      expect(await oauthFailure(exchange(config, st, { actor_token_type: ACCESS_TOKEN_TYPE }))).toMatchObject({ status: 400, error: 'invalid_request' });
    });

    it('other grant types are unsupported_grant_type', async () => {
      for (const grant of ['client_credentials', 'password', 'refresh_token', 'urn:ietf:params:oauth:grant-type:jwt-bearer', `${TOKEN_EXCHANGE}x`]) {
        expect(await oauthFailure(client.genericGrantRequest(config, grant, { subject_token: 'x' }))).toMatchObject({ status: 400, error: 'unsupported_grant_type' });
      }
    });

    it('subject_token_type other than access_token, requested_token_type other than access_token, missing parameters: invalid_request', async () => {
      const st = await subject();
      const bad: Record<string, string>[] = [
        { subject_token_type: 'urn:ietf:params:oauth:token-type:id_token' },
        { subject_token_type: 'urn:ietf:params:oauth:token-type:jwt' },
        { requested_token_type: 'urn:ietf:params:oauth:token-type:refresh_token' },
        { requested_token_type: 'urn:ietf:params:oauth:token-type:id_token' },
      ];
      for (const extra of bad) {
        expect(await oauthFailure(exchange(config, st, extra))).toMatchObject({ status: 400, error: 'invalid_request' });
      }
      expect(await oauthFailure(client.genericGrantRequest(config, TOKEN_EXCHANGE, { subject_token_type: ACCESS_TOKEN_TYPE }))).toMatchObject({ status: 400, error: 'invalid_request' });
      expect(await oauthFailure(client.genericGrantRequest(config, TOKEN_EXCHANGE, { subject_token: st }))).toMatchObject({ status: 400, error: 'invalid_request' });
      // requested_token_type = access_token is accepted
      await exchange(config, st, { requested_token_type: ACCESS_TOKEN_TYPE });
    });
  });
});
