import Redis from 'ioredis';
import { createTestApp, randomIp, STRONG_PASSWORD, TestApp, uniqueEmail } from '../../setup/app';
import { createTenant, TenantFixture } from '../../factories/tenant.factory';
import { flushTestPrefix, rawRedis } from '../agents/agents.helpers';

/**
 * Ended sessions and the bearer guard: Redis holds each session's state, PostgreSQL is the source
 * of truth, so losing Redis's keys never brings an ended session's access tokens back.
 */
describe('end users: ended sessions stay ended (bearer guard, Redis and PostgreSQL)', () => {
  let t: TestApp;
  let tenant: TenantFixture;
  let redis: Redis;
  beforeAll(async () => {
    t = await createTestApp();
    tenant = await createTenant(t.db);
    redis = rawRedis();
  });
  afterAll(async () => {
    redis.disconnect();
    await t.close();
  });

  const register = async () =>
    (await t.http().post('/v1/auth/register').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', randomIp()).send({ email: uniqueEmail(), password: STRONG_PASSWORD, consent: true }).expect(201)).body;
  const me = (token: string) => t.http().get('/v1/auth/me').set('Authorization', `Bearer ${token}`);
  const sidOf = (token: string) => JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString()).sid as string;
  const slot = (sid: string) => redis.get(`${process.env.REDIS_KEY_PREFIX}revoked:sid:${sid}`);

  it('a logged-out access token stays refused after Redis lost its keys', async () => {
    const u = await register();
    await me(u.access_token).expect(200);
    await t.http().post('/v1/auth/logout').set('Authorization', `Bearer ${u.access_token}`).expect(204);
    await me(u.access_token).expect(401);
    expect(await flushTestPrefix(redis)).toBeGreaterThan(0);
    expect(await slot(sidOf(u.access_token))).toBeNull();
    // parallel calls on the empty slot: every one is refused
    const answers = await Promise.all(Array.from({ length: 8 }, () => me(u.access_token)));
    expect(answers.map((r) => r.status)).toEqual(Array(8).fill(401));
    expect(answers[0].headers['www-authenticate']).toMatch(/^Bearer error="invalid_token"/);
    // PostgreSQL's answer is cached again
    expect(await slot(sidOf(u.access_token))).toBe('1');
  });

  it('a live session keeps working after a flush; its state is cached as live', async () => {
    const u = await register();
    await flushTestPrefix(redis);
    await me(u.access_token).expect(200);
    expect(await slot(sidOf(u.access_token))).toBe('0');
    await me(u.access_token).expect(200);
  });

  it('a session ended in PostgreSQL with nothing in Redis is refused (a revocation Redis never saw)', async () => {
    const u = await register();
    await t.db.query(`UPDATE user_sessions SET revoked_at = now(), revoked_reason = 'test' WHERE id = $1`, [sidOf(u.access_token)]);
    await me(u.access_token).expect(401);
  });

  it('a session cached as live is refused at once when it ends (the writer overwrites the slot)', async () => {
    const u = await register();
    await me(u.access_token).expect(200);
    expect(await slot(sidOf(u.access_token))).toBe('0');
    await t.http().post('/v1/auth/logout').set('Authorization', `Bearer ${u.access_token}`).expect(204);
    expect(await slot(sidOf(u.access_token))).toBe('1');
    await me(u.access_token).expect(401);
  });

  it('refresh-token reuse ends the session for its access tokens too, also after a flush', async () => {
    const u = await register();
    const refresh = (rt: string) => t.http().post('/v1/auth/refresh').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', randomIp()).send({ refresh_token: rt });
    const next = (await refresh(u.refresh_token).expect(200)).body;
    await me(next.access_token).expect(200);
    // the rotated parent presented again after its child was used: reuse, the session ends
    await refresh(next.refresh_token).expect(200);
    await refresh(u.refresh_token).expect(401);
    await me(next.access_token).expect(401);
    await flushTestPrefix(redis);
    await me(next.access_token).expect(401);
  });
  describe('logout scopes (local, global, others)', () => {
    /** one user signed in three times (sessions a, b, c) and a bystander of the same tenant */
    const threeSessions = async () => {
      const email = uniqueEmail();
      const first = (await t.http().post('/v1/auth/register').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', randomIp()).send({ email, password: STRONG_PASSWORD, consent: true }).expect(201)).body;
      const login = async () =>
        (await t.http().post('/v1/auth/login').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', randomIp()).send({ email, password: STRONG_PASSWORD }).expect(200)).body;
      return { a: first, b: await login(), c: await login(), other: await register(), userId: first.user.id as string };
    };
    const refresh = (rt: string) => t.http().post('/v1/auth/refresh').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', randomIp()).send({ refresh_token: rt });
    const logout = (token: string, query = '') => t.http().post(`/v1/auth/logout${query}`).set('Authorization', `Bearer ${token}`);
    const audits = (userId: string) =>
      t.db.query<{ metadata: { scope: string; sessions_ended: number }; target_type: string }>(
        `SELECT metadata, target_type FROM audit_events WHERE type = 'user.signed_out' AND actor_id = $1 ORDER BY created_at`,
        [userId],
      );

    it('scope=others ends every other session of the user and keeps this one; one audit event', async () => {
      const s = await threeSessions();
      await logout(s.a.access_token, '?scope=others').expect(204);
      await me(s.a.access_token).expect(200);
      for (const x of [s.b, s.c]) {
        await me(x.access_token).expect(401);
        expect((await refresh(x.refresh_token).expect(401)).body.code).toBe('auth/invalid_refresh_token');
      }
      const kept = (await refresh(s.a.refresh_token).expect(200)).body;
      await me(kept.access_token).expect(200);
      await me(s.other.access_token).expect(200);
      const rows = await audits(s.userId);
      expect(rows).toEqual([{ metadata: { scope: 'others', sessions_ended: 2 }, target_type: 'user' }]);
      // nothing left to end: 204, and no second event
      await logout(kept.access_token, '?scope=others').expect(204);
      expect(await audits(s.userId)).toHaveLength(1);
    });

    it('scope=global ends every session of the user, this one included; a bystander is untouched', async () => {
      const s = await threeSessions();
      await logout(s.b.access_token, '?scope=global').expect(204);
      for (const x of [s.a, s.b, s.c]) {
        await me(x.access_token).expect(401);
        await refresh(x.refresh_token).expect(401);
      }
      await me(s.other.access_token).expect(200);
      expect((await audits(s.userId)).map((r) => r.metadata)).toEqual([{ scope: 'global', sessions_ended: 3 }]);
      // the state is in PostgreSQL: losing Redis's keys brings none of them back
      await flushTestPrefix(redis);
      for (const x of [s.a, s.b, s.c]) await me(x.access_token).expect(401);
    });

    it('scope=local (the default) ends only this session', async () => {
      const s = await threeSessions();
      await logout(s.c.access_token, '?scope=local').expect(204);
      await me(s.c.access_token).expect(401);
      await me(s.a.access_token).expect(200);
      await me(s.b.access_token).expect(200);
    });

    it('an unknown scope or another query parameter is 400 naming it; nothing ends', async () => {
      const s = await threeSessions();
      for (const q of ['?scope=all', '?scope=', '?scope=GLOBAL', '?everywhere=true']) {
        const r = await logout(s.a.access_token, q).expect(400);
        expect(r.body.code).toBe('request/invalid');
        expect(r.body.errors.map((e: { field: string }) => e.field)).toContainEqual(q.includes('everywhere') ? 'everywhere' : 'scope');
      }
      for (const x of [s.a, s.b, s.c]) await me(x.access_token).expect(200);
    });
  });
});
