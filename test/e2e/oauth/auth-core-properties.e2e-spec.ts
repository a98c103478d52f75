/**
 * Tests written by a mutation review of the security core (shared/auth, oauth, sessions, users):
 * each pins a property no other test checked (a mutant of the code survived the whole suite).
 */
import Redis from 'ioredis';
import { JwtService, pastSecondOf } from '../../../src/shared/crypto/jwt.service';
import { AgentDenylistService } from '../../../src/modules/agents/agent-denylist.service';
import { REDIS } from '../../../src/shared/redis/redis.module';
import { AgentFixture, createAgent } from '../../factories/agent.factory';
import { createTenant, TenantFixture } from '../../factories/tenant.factory';
import { createTestApp, randomIp, TestApp } from '../../setup/app';
import { basic, claims as claimsOf, exchangeBody, login, postToken, registerUser, RegisteredUser } from '../oauth/oauth-helpers';

describe('security properties of auth, oauth and sessions found unchecked by a mutation review', () => {
  let t: TestApp;
  let tenant: TenantFixture;
  let agent: AgentFixture;
  let user: RegisteredUser;

  beforeAll(async () => {
    t = await createTestApp();
    tenant = await createTenant(t.db, { tier: 'pro' });
    agent = await createAgent(t.db, tenant.id, { rate_limits: { token_exchange_per_min: 600 } });
    user = await registerUser(t, tenant);
  });
  afterAll(() => t.close());

  const me = (token: string) => t.http().get('/v1/auth/me').set('Authorization', `Bearer ${token}`);
  const introspect = (token: string) => t.http().post('/oauth/introspect').type('form').set('X-API-Key', tenant.apiKey).send({ token });
  const redis = () => t.app.get<Redis>(REDIS);

  // TR1: TokenRevocationService.sessionEnded `!row || row.ended` -> `!!row && row.ended` survived
  it('a token whose session row is gone (user erased) is refused when Redis has lost its state (PostgreSQL decides: no row = ended)', async () => {
    const u = await registerUser(t, tenant);
    const sid = claimsOf(u.access_token).sid as string;
    const myAgents = () => t.http().get('/v1/users/me/agents').set('Authorization', `Bearer ${u.access_token}`);
    await myAgents().expect(200);
    // erased (its sessions cascade), then Redis loses the session's cached state
    await t.db.query(`DELETE FROM users WHERE id = $1`, [u.id]);
    await redis().del(`revoked:sid:${sid}`);
    const res = await myAgents();
    expect(res.status).toBe(401);
  });
  // IN1: introspection `|| !live` dropped survived (every test's ended session was also refused by the Redis check)
  it('introspection asks PostgreSQL whether the session is live, even while Redis still caches it as live', async () => {
    const s = await login(t, tenant, user.email);
    const sid = claimsOf(s.access_token).sid as string;
    await me(s.access_token).expect(200); // caches "live" for the session
    expect(await redis().get(`revoked:sid:${sid}`)).toBe('0');
    // ended where only PostgreSQL knows (by hand, or a revocation whose Redis mark was lost)
    await t.db.query(`UPDATE user_sessions SET revoked_at = now(), revoked_reason = 'test' WHERE id = $1`, [sid]);
    expect((await introspect(s.access_token).expect(200)).body).toEqual({ active: false });
  });
  // IN3: introspection's userExists (agent tokens signed before subject_sid) answering true survived
  it('an agent token signed before subject_sid was a claim is inactive once its user is erased', async () => {
    const u = await registerUser(t, tenant);
    const { token } = await t.app.get(JwtService).sign(
      { sub: u.id, tenant_id: tenant.id, scope: 'openid', amr: ['pwd', 'tx'], aal: 'AAL1', role: 'member', is_anonymous: false, act: { sub: agent.id }, client_id: agent.id } as never,
      300,
    );
    expect((await introspect(token).expect(200)).body).toMatchObject({ active: true, sub: u.id });
    await t.db.query(`DELETE FROM users WHERE id = $1`, [u.id]);
    expect((await introspect(token).expect(200)).body).toEqual({ active: false });
  });
  describe('POST /oauth/revoke of refresh tokens (RFC 7009)', () => {
    const revokeWithKey = (token: string, apiKey = tenant.apiKey) => t.http().post('/oauth/revoke').type('form').set('X-API-Key', apiKey).send({ token });
    const refresh = (token: string, apiKey = tenant.apiKey) =>
      t.http().post('/v1/auth/refresh').set('X-API-Key', apiKey).set('X-Forwarded-For', randomIp()).send({ refresh_token: token });

    // RV3: `AND tenant_id = $2` dropped from revokeRefreshToken survived
    it("another tenant's API key presenting a refresh token answers 200 and ends nothing", async () => {
      const other = await createTenant(t.db, { tier: 'pro' });
      const s = await login(t, tenant, user.email);
      await revokeWithKey(s.refresh_token, other.apiKey).expect(200);
      await me(s.access_token).expect(200);
      await refresh(s.refresh_token).expect(200);
    });

    // RV4: the secret check of revokeRefreshToken dropped survived
    it('a refresh token id with a wrong secret ends nothing (the id alone is no credential)', async () => {
      const s = await login(t, tenant, user.email);
      const [id, secret] = s.refresh_token.split(':');
      const wrong = `${id}:${(secret[0] === 'A' ? 'B' : 'A') + secret.slice(1)}`;
      await revokeWithKey(wrong).expect(200);
      await me(s.access_token).expect(200);
      await refresh(s.refresh_token).expect(200);
    });

    // RV6: markSessionsRevoked after the refresh-token revocation dropped survived
    it("revoking a refresh token refuses the session's access tokens at once (also where they were cached as live)", async () => {
      const s = await login(t, tenant, user.email);
      await me(s.access_token).expect(200); // the session is cached as live
      await revokeWithKey(s.refresh_token).expect(200);
      expect((await me(s.access_token)).status).toBe(401);
    });
  });

  // CA1: `|| agent.revoked_at` dropped from client authentication survived
  it('a revoked agent cannot authenticate to introspection or revocation (401 invalid_client)', async () => {
    const revoked = await createAgent(t.db, tenant.id, { revoked: true });
    const s = await login(t, tenant, user.email);
    const res = await t.http().post('/oauth/introspect').type('form').set('Authorization', basic(revoked.id, revoked.secret)).send({ token: s.access_token });
    expect(res.status).toBe(401);
    expect(res.body.error).toBe('invalid_client');
    const rev = await t.http().post('/oauth/revoke').type('form').set('Authorization', basic(revoked.id, revoked.secret)).send({ token: s.access_token });
    expect(rev.status).toBe(401);
    expect(rev.body.error).toBe('invalid_client');
    await me(s.access_token).expect(200);
  });
  describe('token exchange scope (RFC 8693 2.1, contract "Tokens": requested ∩ subject ∩ agent ∩ tenant)', () => {
    // EX1: `have.has(s) &&` dropped from the granted scope survived
    it("never grants a scope the subject token does not carry, even one the agent's allowlist has", async () => {
      const s = await login(t, tenant, user.email);
      const c = claimsOf(s.access_token);
      // the same session's token, carrying only openid (as a token signed while the tenant's scopes were narrower)
      const { iss: _i, aud: _a, exp: _e, iat: _t, jti: _j, ...rest } = c;
      const { token } = await t.app.get(JwtService).sign({ ...rest, scope: 'openid' } as never);
      const res = await postToken(t, agent, exchangeBody(token, { scope: 'openid email' })).expect(200);
      expect(res.body.scope).toBe('openid');
    });

    // EX2: the tenant's current user scopes filter on the agent's allowlist dropped survived
    it('never grants a scope the tenant removed from its user scopes after the subject token was signed', async () => {
      const ten = await createTenant(t.db, { tier: 'pro' });
      const ag = await createAgent(t.db, ten.id, { rate_limits: { token_exchange_per_min: 600 } });
      const u = await registerUser(t, ten);
      expect(claimsOf(u.access_token).scope).toBe('openid profile email');
      await t.db.query(`UPDATE tenants SET user_scopes = 'openid profile' WHERE id = $1`, [ten.id]);
      await t.tenantChanged(ten.id);
      const res = await postToken(t, ag, exchangeBody(u.access_token, { scope: 'openid email' })).expect(200);
      expect(res.body.scope).toBe('openid');
    });
  });
  // EX5: `AND s.revoked_at IS NULL` dropped from the issuing statement's session guard survived
  it("token exchange refuses a subject token whose session ended in PostgreSQL though Redis still caches it as live (the issuing statement decides)", async () => {
    const s = await login(t, tenant, user.email);
    const sid = claimsOf(s.access_token).sid as string;
    await me(s.access_token).expect(200); // cached as live
    // a sign-out that committed after the exchange's Redis read (or whose mark was lost)
    await t.db.query(`UPDATE user_sessions SET revoked_at = now(), revoked_reason = 'test' WHERE id = $1`, [sid]);
    const res = await postToken(t, agent, exchangeBody(s.access_token));
    expect(res.status).toBe(400);
    expect(res.body.error).toBe('invalid_grant');
  });
  // EX6: `if (denied)` -> `if (false)` (the exchange goes on in a kill's own second) survived
  it("an exchange in the very second of a kill-tokens answers a token the bearer guard accepts (never one dead on arrival)", async () => {
    const ag = await createAgent(t.db, tenant.id, { rate_limits: { token_exchange_per_min: 600 } });
    const s = await login(t, tenant, user.email);
    const denylist = t.app.get(AgentDenylistService);
    await pastSecondOf();
    await t.db.tx((tx) => denylist.deny(tx, tenant.id, ag.id, 'tokens_killed', 900));
    await denylist.cacheAfterCommit(ag.id);
    const res = await postToken(t, ag, exchangeBody(s.access_token)).expect(200);
    await me(res.body.access_token).expect(200);
  });
  // SS12: `AND s.revoked_at IS NULL` dropped from SessionsService.assertCanStepUp survived
  it('step-up on a session ended in PostgreSQL (Redis still caching it as live) is refused before the password is checked', async () => {
    const s = await login(t, tenant, user.email);
    const sid = claimsOf(s.access_token).sid as string;
    await me(s.access_token).expect(200); // cached as live
    await t.db.query(`UPDATE user_sessions SET revoked_at = now(), revoked_reason = 'test' WHERE id = $1`, [sid]);
    const res = await t.http().post('/v1/auth/step-up/password').set('Authorization', `Bearer ${s.access_token}`).set('X-Forwarded-For', randomIp()).send({ password: 'not the password at all' });
    expect(res.status).toBe(401);
    expect(res.headers['www-authenticate']).toMatch(/error="invalid_token"/);
    expect(res.body.code).not.toBe('auth/invalid_credentials');
  });
});
