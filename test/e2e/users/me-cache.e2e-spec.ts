import { Queue } from 'bullmq';
import Redis from 'ioredis';
import { GUEST_PURGE_JOB, MAINTENANCE_QUEUE } from '../../../src/modules/guests/purge/guest-purge.scheduler';
import { GUEST_PURGE_RUN, GuestPurgeService } from '../../../src/modules/guests/purge/guest-purge.service';
import { UserProfileCache } from '../../../src/shared/cache/user-profile.cache';
import { REDIS } from '../../../src/shared/redis/redis.module';
import { createTenant, TenantFixture } from '../../factories/tenant.factory';
import { createTestApp, randomIp, STRONG_PASSWORD, TestApp, uniqueEmail } from '../../setup/app';
import { redisWrites } from '../../setup/redis-writes';
import { linkToken, login, MailWorld, post, register, startMailWorld, tenantWithKey } from '../account-security/account-security.helpers';

/**
 * GET /v1/auth/me answers from a Redis profile cache. What matters is that it is never stale
 * after a write the service answered: each writer leaves a tombstone (a nonce of its own) after
 * its commit, and a reader fills only what it saw before loading: an empty slot, or that very
 * tombstone.
 */
describe('GET /v1/auth/me profile cache', () => {
  let w: MailWorld;
  let t: TestApp;
  let redis: Redis;
  let cache: UserProfileCache;
  let guests: TenantFixture;
  beforeAll(async () => {
    w = await startMailWorld();
    t = w.t;
    redis = t.app.get(REDIS);
    cache = t.app.get(UserProfileCache);
    guests = await createTenant(t.db, { anonymous_signins_enabled: true });
  }, 60_000);
  afterAll(() => w?.close());

  const me = (access: string) => t.http().get('/v1/auth/me').set('Authorization', `Bearer ${access}`).set('X-Forwarded-For', randomIp());
  const slot = (userId: string) => redis.get(`me:${userId}`);
  const guest = async () => (await t.http().post('/v1/auth/anonymous').set('X-API-Key', guests.apiKey).set('X-Forwarded-For', randomIp()).send({}).expect(201)).body;

  /**
   * Returns once this file's worker runs no guest purge of its own: its start on this new database
   * queued one at once (its catch-up: no purge had completed there), and a daily one may fall due.
   * Until then a purge of the test's own would be refused (another holds the lease).
   */
  async function noWorkerPurge(): Promise<void> {
    const conn = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', { maxRetriesPerRequest: null });
    const queue = new Queue(MAINTENANCE_QUEUE, { connection: conn, prefix: `${process.env.REDIS_KEY_PREFIX}bull` });
    try {
      for (let i = 0; i < 400; i++) {
        const jobs = (await queue.getJobs(['active', 'waiting', 'prioritized'])).filter((j) => j.name === GUEST_PURGE_JOB);
        const [lease] = await t.db.query<{ holder: string | null }>(`SELECT holder FROM maintenance_runs WHERE job = $1`, [GUEST_PURGE_RUN]);
        if (!jobs.length && !lease?.holder) return;
        await new Promise((r) => setTimeout(r, 50));
      }
      throw new Error("the worker's guest purge never finished");
    } finally {
      await queue.close();
      conn.disconnect();
    }
  }

  it('the first read fills the slot (no secrets in it); later reads are served from it', async () => {
    const g = await guest();
    expect(await slot(g.user.id)).toBeNull();
    const first = await me(g.access_token).expect(200);
    const cached = JSON.parse((await slot(g.user.id))!);
    expect(cached).toEqual({ ...first.body, tenant_id: guests.id });
    expect(Object.keys(cached).join()).not.toMatch(/password|date_of_birth|secret/);
    // a value only the cache holds shows: the read did not reach PostgreSQL
    await redis.set(`me:${g.user.id}`, JSON.stringify({ ...cached, public_metadata: { from: 'cache' } }), 'KEEPTTL');
    expect((await me(g.access_token).expect(200)).body.public_metadata).toEqual({ from: 'cache' });
    expect(await redis.ttl(`me:${g.user.id}`)).toBeLessThanOrEqual(120);
  });

  it('email verification shows at once', async () => {
    const tenant = await tenantWithKey(t);
    const u = await register(t, tenant.apiKey);
    expect((await me(u.access).expect(200)).body.email_verified).toBe(false);
    const mail = await w.nextMail((m) => m.to.includes(u.email) && m.subject.startsWith('Verify your email address'));
    await post(t, '/v1/auth/verify-email', tenant.apiKey, { token: linkToken(mail, '/verify-email') }).expect(204);
    expect((await me(u.access).expect(200)).body.email_verified).toBe(true);
  });

  it('a sign-in shows its last_sign_in_at at once', async () => {
    const tenant = await tenantWithKey(t);
    const u = await register(t, tenant.apiKey);
    const before = (await me(u.access).expect(200)).body.last_sign_in_at;
    await new Promise((r) => setTimeout(r, 20));
    await login(t, tenant.apiKey, u.email);
    const after = (await me(u.access).expect(200)).body.last_sign_in_at;
    expect(new Date(after).getTime()).toBeGreaterThan(new Date(before).getTime());
  });

  it('a claimed guest shows its email and is_anonymous false at once, through the guest token too', async () => {
    const g = await guest();
    expect((await me(g.access_token).expect(200)).body.is_anonymous).toBe(true);
    const email = uniqueEmail('claim');
    const claimed = await t.http().post('/v1/auth/register').set('X-API-Key', guests.apiKey).set('X-Forwarded-For', randomIp())
      .set('Authorization', `Bearer ${g.access_token}`).send({ email, password: STRONG_PASSWORD, consent: true }).expect(201);
    for (const access of [claimed.body.access_token, g.access_token]) {
      const body = (await me(access).expect(200)).body;
      expect(body).toMatchObject({ id: g.user.id, email, is_anonymous: false });
    }
  });

  it('a purged guest is gone at once: its access token answers 401 even though its profile was cached', async () => {
    const tenant = await createTenant(t.db, { anonymous_signins_enabled: true, anonymous_user_ttl_days: 1 });
    const g = (await t.http().post('/v1/auth/anonymous').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', randomIp()).send({}).expect(201)).body;
    await me(g.access_token).expect(200);
    expect(await slot(g.user.id)).not.toBeNull();
    await noWorkerPurge();
    await t.db.query(`UPDATE users SET last_active_at = now() - interval '2 days' WHERE id = $1`, [g.user.id]);
    const r = await t.app.get(GuestPurgeService).runOnce();
    expect(r.perTenant.find((x) => x.tenantId === tenant.id)?.deleted).toBe(1);
    expect((await me(g.access_token).expect(401)).body.code).toBe('auth/invalid_token');
  });

  it('race: a reader that loaded the row before a write cannot put the old profile back after it', async () => {
    const g = await guest();
    const fresh = (await me(g.access_token).expect(200)).body;
    const stale = { ...fresh, tenant_id: guests.id, public_metadata: { stale: true } };
    await redis.del(`me:${g.user.id}`);
    // a slow reader saw the slot empty, then loaded the row before the writer's commit
    const sawEmpty = await cache.lookup(g.user.id);
    expect(sawEmpty).toEqual({ guard: null });
    await cache.invalidate([g.user.id]); // the writer, after its commit
    const tombstone = (await slot(g.user.id))!;
    expect(tombstone).toMatch(/^-.{8,}/);
    await cache.fill(g.user.id, stale, sawEmpty.guard); // the slow reader fills after the writer: refused
    expect(await slot(g.user.id)).toBe(tombstone);
    // another slow reader saw this tombstone, loaded, and a second write commits before it fills
    const sawFirst = await cache.lookup(g.user.id);
    expect(sawFirst).toEqual({ guard: tombstone });
    await cache.invalidate([g.user.id]);
    const second = (await slot(g.user.id))!;
    expect(second).not.toBe(tombstone); // each write its own nonce
    await cache.fill(g.user.id, stale, sawFirst.guard);
    expect(await slot(g.user.id)).toBe(second);
    expect((await me(g.access_token).expect(200)).body.public_metadata).toEqual({});
  });

  it('a reader after the write refills the slot at once, and keeps what was left of the tombstone’s life', async () => {
    const g = await guest();
    await me(g.access_token).expect(200);
    await cache.invalidate([g.user.id]);
    await redis.expire(`me:${g.user.id}`, 3000); // as if the tombstone outlived the slot TTL (120 s here)
    const body = (await me(g.access_token).expect(200)).body;
    // the read that saw the tombstone loaded after the write: its fill replaces the tombstone
    expect(JSON.parse((await slot(g.user.id))!)).toEqual({ ...body, tenant_id: guests.id });
    expect(await redis.ttl(`me:${g.user.id}`)).toBeGreaterThan(2900);
    // and the next read is served from the slot, not PostgreSQL
    await redis.set(`me:${g.user.id}`, JSON.stringify({ ...body, tenant_id: guests.id, public_metadata: { from: 'cache' } }), 'KEEPTTL');
    expect((await me(g.access_token).expect(200)).body.public_metadata).toEqual({ from: 'cache' });
  });

  it('a slot holding another tenant’s user is never served', async () => {
    const g = await guest();
    const body = (await me(g.access_token).expect(200)).body;
    await redis.set(`me:${g.user.id}`, JSON.stringify({ ...body, email: 'other@example.com', tenant_id: '00000000-0000-4000-8000-000000000000' }), 'EX', 60);
    expect((await me(g.access_token).expect(200)).body.email).toBeNull();
  });

  it('one Redis round trip per warm call: the bearer guard reads the profile and the activity window with its revocation check', async () => {
    const g = await guest();
    await me(g.access_token).expect(200); // fills the slot, opens the activity window
    const sid = JSON.parse(Buffer.from(g.access_token.split('.')[1], 'base64url').toString()).sid as string;
    // this process's Redis client, write by write (MONITOR would also see other test files' traffic,
    // and ioredis can fail to start it while commands stream in)
    const writes = await redisWrites(redis, async () => expect((await me(g.access_token).expect(200)).body.id).toBe(g.user.id));
    const touching = writes.filter((cmds) => cmds.some((args) => args.some((a) => a.includes(g.user.id) || a.includes(sid))));
    expect(touching).toHaveLength(1); // one round trip
    const seen = touching[0].filter((args) => args.some((a) => a.includes(g.user.id) || a.includes(sid)));
    const month = new Date().toISOString().slice(0, 7);
    const prefix = redis.options.keyPrefix ?? '';
    // one command: the revocation keys (session, token jti) with the handler's two reads
    expect(seen).toHaveLength(1);
    const [command, ...keys] = seen[0];
    expect(command).toBe('mget');
    expect(keys).toContain(`${prefix}revoked:sid:${sid}`);
    expect(keys.slice(-2)).toEqual([`${prefix}me:${g.user.id}`, `${prefix}act:${month}:${g.user.id}`]);
  });

  it('a refused token gets nothing from the prefetch: a revoked session answers 401 even with its profile cached', async () => {
    const g = await guest();
    await me(g.access_token).expect(200);
    expect(await slot(g.user.id)).not.toBeNull();
    await t.http().post('/v1/auth/logout').set('Authorization', `Bearer ${g.access_token}`).set('X-Forwarded-For', randomIp()).expect(204);
    expect((await me(g.access_token).expect(401)).body.code).toBe('auth/invalid_token');
  });

  it('activity is still recorded at most once a minute (last_active_at) behind the cache', async () => {
    const g = await guest();
    await me(g.access_token).expect(200);
    await t.db.query(`UPDATE users SET last_active_at = now() - interval '10 days' WHERE id = $1`, [g.user.id]);
    await me(g.access_token).expect(200); // within the minute: no write
    const [r1] = await t.db.query<{ age: number }>(`SELECT extract(epoch FROM now() - last_active_at) AS age FROM users WHERE id = $1`, [g.user.id]);
    expect(Number(r1.age)).toBeGreaterThan(86400);
    const month = new Date().toISOString().slice(0, 7);
    await redis.del(`act:${month}:${g.user.id}`); // the minute has passed
    await me(g.access_token).expect(200);
    const [r2] = await t.db.query<{ age: number }>(`SELECT extract(epoch FROM now() - last_active_at) AS age FROM users WHERE id = $1`, [g.user.id]);
    expect(Number(r2.age)).toBeLessThan(60);
  });
});

describe('GET /v1/auth/me with USER_CACHE_TTL_SECONDS=0', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp({ USER_CACHE_TTL_SECONDS: '0' });
  });
  afterAll(() => t.close());

  it('reads PostgreSQL every time and stores nothing', async () => {
    const tenant = await createTenant(t.db, { anonymous_signins_enabled: true });
    const g = (await t.http().post('/v1/auth/anonymous').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', randomIp()).send({}).expect(201)).body;
    await t.http().get('/v1/auth/me').set('Authorization', `Bearer ${g.access_token}`).expect(200);
    expect(await t.app.get<Redis>(REDIS).get(`me:${g.user.id}`)).toBeNull();
    await t.db.query(`UPDATE users SET public_metadata = '{"plan":"gold"}' WHERE id = $1`, [g.user.id]);
    expect((await t.http().get('/v1/auth/me').set('Authorization', `Bearer ${g.access_token}`).expect(200)).body.public_metadata).toEqual({ plan: 'gold' });
  });
});
