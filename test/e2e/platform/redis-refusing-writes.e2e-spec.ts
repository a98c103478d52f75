import { spawn } from 'child_process';
import Redis from 'ioredis';
import { createApiKey, signupTenant } from '../../factories/dashboard.factory';
import { createTestApp, randomIp, STRONG_PASSWORD, TestApp, uniqueEmail } from '../../setup/app';
import { ownRedis } from '../../setup/own-redis';
import { eventually } from '../webhooks/webhook-helpers';
import { APP_CONFIG } from '../../../src/config/config';
import { ReadThroughCache } from '../../../src/shared/cache/read-through.cache';
import { CommandBus } from '@nestjs/cqrs';
import { DashboardPrincipal } from '../../../src/shared/auth/auth-context';
import { RevokeApiKeyCommand } from '../../../src/modules/api-keys/api-keys.handlers';
import { RevokeAgentCommand } from '../../../src/modules/agents/revoke-agent/revoke-agent.command';
import { UpdateAnonymousSettingsCommand } from '../../../src/modules/guests/settings/anonymous-settings.handlers';
import { DeleteUserCommand } from '../../../src/modules/users/admin/delete-user/delete-user.command';
import { agentToken, agentsUrl, as, bearerCall, endUser as agentEndUser, registerAgent, tenantOnTier } from '../agents/agents.helpers';
import { DashboardFixture } from '../../factories/dashboard.factory';
import { tenantWithKey } from '../account-security/account-security.helpers';
import { OneTimeTokens } from '../../../src/modules/account-security/one-time-tokens.service';
import { ResetPasswordCommand } from '../../../src/modules/account-security/password/password.commands';
import { VerifyMagicLinkCommand } from '../../../src/modules/account-security/magic-link/magic-link.commands';
import { ApiKeyResolver } from '../../../src/shared/auth/api-key.strategy';
import { TokenRevocationService } from '../../../src/shared/auth/token-revocation.service';
import { AppError } from '../../../src/shared/errors/app-error';

/**
 * A Redis that answers reads but refuses writes (out of memory under `noeviction`, which
 * docs/scaling.md recommends; NOREPLICAS; READONLY on a replica after a failover). ioredis
 * resolves a pipeline with per-command errors rather than rejecting it, so a write it refused
 * must not be taken for done: a logout whose "ended" mark was refused would leave the session
 * cached as live, its access token working until the cache expired. A Redis of the test's own.
 */
describe('Redis refusing writes', () => {
  let t: TestApp;
  let server: ReturnType<typeof spawn>;
  let admin: Redis;
  beforeAll(async () => {
    const own = await ownRedis();
    server = own.startRedis();
    await eventually(own.ping, 10_000, 'redis-server to start');
    admin = new Redis(own.port, '127.0.0.1');
    t = await createTestApp({ REDIS_URL: `redis://127.0.0.1:${own.port}` });
  });
  afterAll(async () => {
    await t.close();
    admin.disconnect();
    server.kill('SIGKILL');
  });

  const endUser = async () => {
    const dash = await signupTenant(t);
    const { key } = await createApiKey(t, dash);
    const email = uniqueEmail('refused');
    const reg = await t.http().post('/v1/auth/register').set('X-API-Key', key).set('X-Forwarded-For', randomIp()).send({ email, password: STRONG_PASSWORD, consent: true }).expect(201);
    return {
      me: (token = reg.body.access_token) => t.http().get('/v1/auth/me').set('Authorization', `Bearer ${token}`),
      logout: (scope = 'local') => t.http().post(`/v1/auth/logout?scope=${scope}`).set('Authorization', `Bearer ${reg.body.access_token}`),
      /** another session of the same user */
      signIn: async () => (await t.http().post('/v1/auth/login').set('X-API-Key', key).set('X-Forwarded-For', randomIp()).send({ email, password: STRONG_PASSWORD }).expect(200)).body.access_token as string,
    };
  };

  it('out of memory (noeviction): the logout deletes the cached "live" state it cannot overwrite, so the token is refused at once (read from PostgreSQL)', async () => {
    const u = await endUser();
    await u.me().expect(200); // the session is cached as live
    await admin.config('SET', 'maxmemory-policy', 'noeviction');
    await admin.config('SET', 'maxmemory', '1');
    try {
      await expect(admin.set('probe', '1')).rejects.toThrow(/OOM/); // writes refused, reads answered
      await u.logout().expect(204);
      await u.me().expect(401);
    } finally {
      await admin.config('SET', 'maxmemory', '0');
    }
    await u.me().expect(401);
  });

  const outOfMemory = async <T>(fn: () => Promise<T>): Promise<T> => {
    await admin.config('SET', 'maxmemory-policy', 'noeviction');
    await admin.config('SET', 'maxmemory', '1');
    try {
      await expect(admin.set('probe', '1')).rejects.toThrow(/OOM/);
      return await fn();
    } finally {
      await admin.config('SET', 'maxmemory', '0');
    }
  };

  it('out of memory: an RFC 7009 revocation of an access token deletes the cached "not revoked" answers it cannot overwrite: 200, and the token is refused at once', async () => {
    const dash = await signupTenant(t);
    const { key } = await createApiKey(t, dash);
    const reg = await t.http().post('/v1/auth/register').set('X-API-Key', key).set('X-Forwarded-For', randomIp()).send({ email: uniqueEmail('oom'), password: STRONG_PASSWORD, consent: true }).expect(201);
    const me = () => t.http().get('/v1/auth/me').set('Authorization', `Bearer ${reg.body.access_token}`);
    await me().expect(200); // the tenant's "no revoked token" answer cached
    // the API key principal cached, so the revoke itself needs no cache fill
    await t.http().post('/oauth/revoke').type('form').set('X-API-Key', key).send({ token: 'not-a-token' }).expect(200);
    await outOfMemory(async () => {
      await t.http().post('/oauth/revoke').type('form').set('X-API-Key', key).send({ token: reg.body.access_token }).expect(200);
      await me().expect(401);
    });
    await me().expect(401);
  });

  it('out of memory: a bearer call whose cached revocation answers expired is answered from PostgreSQL (the refused cache fill ignored), not 503', async () => {
    const dash = await signupTenant(t);
    const { key } = await createApiKey(t, dash);
    const reg = await t.http().post('/v1/auth/register').set('X-API-Key', key).set('X-Forwarded-For', randomIp()).send({ email: uniqueEmail('oom'), password: STRONG_PASSWORD, consent: true }).expect(201);
    const me = () => t.http().get('/v1/auth/me').set('Authorization', `Bearer ${reg.body.access_token}`);
    await me().expect(200);
    // the tenant gate's TTL ran out (as if expired); then the tenant has a revoked token, so the jti's own answer is read too
    await admin.del(`${process.env.REDIS_KEY_PREFIX}revoked:jti-tenant:${dash.tenantId}`);
    await outOfMemory(() => me().expect(200));
    const other = await t.http().post('/v1/auth/login').set('X-API-Key', key).set('X-Forwarded-For', randomIp()).send({ email: reg.body.user.email, password: STRONG_PASSWORD }).expect(200);
    await t.http().post('/oauth/revoke').type('form').set('X-API-Key', key).send({ token: other.body.access_token }).expect(200);
    await admin.del(`${process.env.REDIS_KEY_PREFIX}revoked:jti:${(JSON.parse(Buffer.from(reg.body.access_token.split('.')[1], 'base64url').toString()) as { jti: string }).jti}`);
    await outOfMemory(async () => {
      await me().expect(200);
      await t.http().get('/v1/auth/me').set('Authorization', `Bearer ${other.body.access_token}`).expect(401);
    });
  });

  it('out of memory: a cache invalidation (a revoked API key, an updated agent) deletes the slots it cannot tombstone, so the next read loads the row', async () => {
    const redis = new Redis(Number(new URL(t.app.get(APP_CONFIG).REDIS_URL).port), '127.0.0.1', { keyPrefix: 'oom-cache:' });
    const cache = new ReadThroughCache<{ v: number }>(redis, 'thing', () => 120);
    try {
      await cache.fill('a', { v: 1 }, null);
      expect(await cache.lookup('a')).toEqual({ value: { v: 1 }, guard: null });
      await admin.config('SET', 'maxmemory-policy', 'noeviction');
      await admin.config('SET', 'maxmemory', '1');
      try {
        expect(await cache.invalidate(['a'])).toBe(true);
        expect(await cache.lookup('a')).toEqual({ guard: null }); // gone: the next read loads the row
      } finally {
        await admin.config('SET', 'maxmemory', '0');
      }
    } finally {
      redis.disconnect();
    }
  });

  it('no write taken at all (NOREPLICAS): the logout answers 503, not 204; once Redis takes writes, the retried logout ends the token', async () => {
    const u = await endUser();
    await u.me().expect(200);
    await admin.config('SET', 'min-replicas-to-write', '1');
    try {
      await expect(admin.del('probe')).rejects.toThrow(/NOREPLICAS/);
      const refused = await u.logout();
      expect([refused.status, refused.body.code]).toEqual([503, 'server/unavailable']);
    } finally {
      await admin.config('SET', 'min-replicas-to-write', '0');
    }
    await u.logout().expect(204);
    await u.me().expect(401);
  });

  it('no write taken at all, sign-out everywhere: 503; retried once Redis takes writes, it ends the other sessions it had ended in PostgreSQL the first time', async () => {
    const u = await endUser();
    const other = await u.signIn();
    await u.me(other).expect(200); // the other session is cached as live
    await admin.config('SET', 'min-replicas-to-write', '1');
    try {
      expect((await u.logout('others')).status).toBe(503);
    } finally {
      await admin.config('SET', 'min-replicas-to-write', '0');
    }
    await u.logout('others').expect(204);
    await u.me(other).expect(401);
    await u.me().expect(200); // its own session stays
  });

  /**
   * Revocations and narrower settings must hold in every API process before they are answered:
   * other processes hold the rows in the read-through cache (API keys, agent clients) or "no
   * denylist entry" for the agent. With no write taken at all, such a change is committed but
   * answered 503 (before: 200, and other processes kept the old state up to the cache TTL); the
   * repeat tells the caches. The command is sent through the command bus while Redis refuses
   * writes (the dashboard's own write limiter would refuse the HTTP request before it), the
   * repeat over HTTP.
   */
  describe('no write taken at all: a change other processes cache answers 503, and its repeat takes effect', () => {
    const ownerOf = (d: DashboardFixture): DashboardPrincipal =>
      ({ userId: d.userId, email: d.email, sessionId: '', csrfToken: d.csrf, reauthAt: new Date(), memberships: [], tenant: { id: d.tenantId, slug: d.slug, role: 'owner' } }) as DashboardPrincipal;
    const refusingWrites = async <T>(fn: () => Promise<T>): Promise<T> => {
      await admin.config('SET', 'min-replicas-to-write', '1');
      try {
        return await fn();
      } finally {
        await admin.config('SET', 'min-replicas-to-write', '0');
      }
    };
    const refused = (p: Promise<unknown>) => expect(p).rejects.toMatchObject({ code: 'server/unavailable' });

    it('a revoked API key', async () => {
      const d = await signupTenant(t);
      const { id, key } = await createApiKey(t, d);
      const useKey = () => t.http().post('/v1/auth/login').set('X-API-Key', key).set('X-Forwarded-For', randomIp()).send({ email: uniqueEmail(), password: STRONG_PASSWORD });
      await useKey().expect(401); // the key works (unknown account), and is cached
      await refusingWrites(() => refused(t.app.get(CommandBus).execute(new RevokeApiKeyCommand(ownerOf(d), id))));
      expect((await t.db.query(`SELECT revoked_at IS NOT NULL AS revoked FROM api_keys WHERE id = $1`, [id]))[0].revoked).toBe(true);
      await useKey().expect(401);
      await t.http().delete(`/v1/auth/dashboard/tenants/${d.slug}/api-keys/${id}`).set('Cookie', d.cookie).set('X-CSRF-Token', d.csrf).expect(200);
      expect((await useKey().expect(401)).body.code).toBe('auth/invalid_api_key');
    });

    it('guest sign-ins switched off', async () => {
      const d = await signupTenant(t);
      const { key } = await createApiKey(t, d);
      const settings = `/v1/auth/dashboard/tenants/${d.slug}/settings/anonymous`;
      await t.http().patch(settings).set('Cookie', d.cookie).set('X-CSRF-Token', d.csrf).send({ anonymous_signins_enabled: true, default_user_role: 'read_only' }).expect(200);
      const guest = () => t.http().post('/v1/auth/anonymous').set('X-API-Key', key).set('X-Forwarded-For', randomIp()).send({});
      await guest().expect(201);
      await refusingWrites(() => refused(t.app.get(CommandBus).execute(new UpdateAnonymousSettingsCommand(ownerOf(d), { anonymous_signins_enabled: false }, undefined))));
      await guest().expect(201); // committed, but the cached key still says enabled
      // the same settings again: nothing to change in PostgreSQL, the caches told all the same
      await t.http().patch(settings).set('Cookie', d.cookie).set('X-CSRF-Token', d.csrf).send({ anonymous_signins_enabled: false }).expect(200);
      expect((await guest().expect(403)).body.code).toBe('anonymous/disabled');
    });

    it('an erased end user: refused before the commit, nothing is erased (503) and the retry does it all; a repeat after the erasure tells the profile cache before its 404', async () => {
      const d = await signupTenant(t);
      const { key } = await createApiKey(t, d);
      const email = uniqueEmail('erased');
      const reg = await t.http().post('/v1/auth/register').set('X-API-Key', key).set('X-Forwarded-For', randomIp()).send({ email, password: STRONG_PASSWORD, consent: true }).expect(201);
      const userId = reg.body.user.id as string;
      const me = () => t.http().get('/v1/auth/me').set('Authorization', `Bearer ${reg.body.access_token}`);
      await me().expect(200); // the session cached as live, the profile cached
      await refusingWrites(() => refused(t.app.get(CommandBus).execute(new DeleteUserCommand(ownerOf(d), userId))));
      expect(await t.db.query(`SELECT id FROM users WHERE id = $1`, [userId])).toEqual([{ id: userId }]);
      expect(await t.db.query(`SELECT 1 FROM audit_events WHERE type = 'user.deleted' AND target_id = $1`, [userId])).toEqual([]);
      await me().expect(200); // nothing happened
      await t.http().delete(`/v1/auth/dashboard/tenants/${d.slug}/users/${userId}`).set('Cookie', d.cookie).set('X-CSRF-Token', d.csrf).expect(204);
      await me().expect(401);
      // erased: a repeat is 404 once it told the profile cache, 503 while Redis takes nothing
      await refusingWrites(() => refused(t.app.get(CommandBus).execute(new DeleteUserCommand(ownerOf(d), userId))));
      const again = await t.http().delete(`/v1/auth/dashboard/tenants/${d.slug}/users/${userId}`).set('Cookie', d.cookie).set('X-CSRF-Token', d.csrf).expect(404);
      expect(again.body.code).toBe('user/not_found');
      expect(await t.db.query(`SELECT 1 FROM audit_events WHERE type = 'user.deleted' AND target_id = $1`, [userId])).toHaveLength(1);
    });

    /**
     * A change whose request cannot be sent again once committed (a single-use reset link or
     * magic link, a password change: the retry's current password is gone) is rolled back when
     * Redis takes no session mark, so its 503 leaves the link usable and the retry ends the
     * sessions, cached as live in every process, at once (committed first, the other session's
     * access token stayed accepted for up to ACCESS_TOKEN_TTL_SECONDS + 60 s, and the retry was 400).
     */
    describe('a change that cannot be sent again: rolled back when the session marks are refused', () => {
      const userWithTwoSessions = async () => {
        const d = await tenantWithKey(t, { magic_link_enabled: true });
        const key = d.apiKey;
        const email = uniqueEmail('once');
        const reg = await t.http().post('/v1/auth/register').set('X-API-Key', key).set('X-Forwarded-For', randomIp()).send({ email, password: STRONG_PASSWORD, consent: true }).expect(201);
        const other = (await t.http().post('/v1/auth/login').set('X-API-Key', key).set('X-Forwarded-For', randomIp()).send({ email, password: STRONG_PASSWORD }).expect(200)).body.access_token as string;
        const otherMe = () => t.http().get('/v1/auth/me').set('Authorization', `Bearer ${other}`);
        await otherMe().expect(200); // cached as live
        const link = (kind: 'password_reset' | 'magic_link') =>
          t.db.tx((tx) => t.app.get(OneTimeTokens).issue(tx, { tenantId: d.tenantId, userId: reg.body.user.id, kind, emailNormalized: email.toLowerCase(), ttlSeconds: 3600 }));
        const live = async () => (await t.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM user_sessions WHERE user_id = $1 AND revoked_at IS NULL`, [reg.body.user.id]))[0].n;
        return { key, email, reg, otherMe, link, live, principal: await t.app.get(ApiKeyResolver).resolve(key) };
      };
      const client = () => ({ ip: randomIp(), userAgent: '' });

      it('a password reset', async () => {
        const u = await userWithTwoSessions();
        const token = await u.link('password_reset');
        await refusingWrites(() => refused(t.app.get(CommandBus).execute(new ResetPasswordCommand(u.principal, token, 'a brand new passphrase 1', client()))));
        expect(await u.live()).toBe(2);
        await u.otherMe().expect(200); // nothing happened
        await t.http().post('/v1/auth/password/reset').set('X-API-Key', u.key).set('X-Forwarded-For', randomIp()).send({ token, password: 'a brand new passphrase 1' }).expect(204);
        await u.otherMe().expect(401);
      });

      it('a first magic-link sign-in that clears the unverified account\'s sessions', async () => {
        const u = await userWithTwoSessions();
        const token = await u.link('magic_link');
        await refusingWrites(() => refused(t.app.get(CommandBus).execute(new VerifyMagicLinkCommand(u.principal, token, undefined))));
        expect(await u.live()).toBe(2);
        await u.otherMe().expect(200);
        await t.http().post('/v1/auth/magic-link/verify').set('X-API-Key', u.key).set('X-Forwarded-For', randomIp()).send({ token }).expect(200);
        await u.otherMe().expect(401);
      });

      it('a password change (Redis refusing from the session marks on)', async () => {
        const u = await userWithTwoSessions();
        const revocation = t.app.get(TokenRevocationService);
        const refusedOnce = jest.spyOn(revocation, 'markSessionsRevoked').mockRejectedValueOnce(new AppError('server/unavailable', 'Token revocation state unavailable'));
        try {
          await t.http().post('/v1/auth/password/change').set('Authorization', `Bearer ${u.reg.body.access_token}`).send({ current_password: STRONG_PASSWORD, new_password: 'a brand new passphrase 3' }).expect(503);
        } finally {
          refusedOnce.mockRestore();
        }
        expect(await u.live()).toBe(2);
        await u.otherMe().expect(200);
        // the retry, with the same current password
        await t.http().post('/v1/auth/password/change').set('Authorization', `Bearer ${u.reg.body.access_token}`).send({ current_password: STRONG_PASSWORD, new_password: 'a brand new passphrase 3' }).expect(204);
        await u.otherMe().expect(401);
      });
    });

    it("a revoked agent: its tokens, once checked and cached as not denylisted, are refused once the revocation answers", async () => {
      const d = await tenantOnTier(t, 'pro');
      const agent = await registerAgent(t, d);
      const user = await agentEndUser(t, d);
      const { token } = await agentToken(t, user, agent.id);
      await bearerCall(t, token).expect(200); // "no denylist entry" cached
      await refusingWrites(() => refused(t.app.get(CommandBus).execute(new RevokeAgentCommand(ownerOf(d), agent.id))));
      await as(t, d).delete(agentsUrl(d, `/${agent.id}`)).expect(200);
      await bearerCall(t, token).expect(401);
    });
  });
});
