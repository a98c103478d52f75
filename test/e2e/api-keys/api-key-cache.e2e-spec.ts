import { namedQueryParams } from '../../setup/query-spy';
import Redis from 'ioredis';
import { CliIo, runCli } from '../../../src/cli';
import { resetConfigForTests } from '../../../src/config/config.module';
import { AgentsService } from '../../../src/modules/agents/agents.service';
import { sha256Hex } from '../../../src/shared/crypto/tokens';
import { REDIS } from '../../../src/shared/redis/redis.module';
import { createAgent } from '../../factories/agent.factory';
import { createApiKey, DashboardFixture, signupTenant } from '../../factories/dashboard.factory';
import { createTestApp, randomIp, STRONG_PASSWORD, TestApp, uniqueEmail } from '../../setup/app';
import { redisWrites } from '../../setup/redis-writes';

/**
 * API keys resolve through a Redis cache of their principal (key + tenant settings). What
 * matters: a revoked key and a changed tenant setting take effect for the very next request.
 */
describe('API-key principal cache', () => {
  let t: TestApp;
  let second: TestApp;
  let redis: Redis;
  let d: DashboardFixture;
  beforeAll(async () => {
    t = await createTestApp();
    second = await createTestApp(); // another API process on the same PostgreSQL and Redis
    redis = t.app.get(REDIS);
    d = await signupTenant(t);
  });
  afterAll(async () => {
    await second?.close();
    await t?.close();
  });

  const slot = (key: string) => redis.get(`apikey:${sha256Hex(key)}`);
  const anon = (app: TestApp, key: string) => app.http().post('/v1/auth/anonymous').set('X-API-Key', key).set('X-Forwarded-For', randomIp()).send({});
  const register = (app: TestApp, key: string) =>
    app.http().post('/v1/auth/register').set('X-API-Key', key).set('X-Forwarded-For', randomIp()).send({ email: uniqueEmail(), password: STRONG_PASSWORD, consent: true });
  const patchGuests = (body: object) =>
    t.http().patch(`/v1/auth/dashboard/tenants/${d.slug}/settings/anonymous`).set('Cookie', d.cookie).set('X-CSRF-Token', d.csrf).set('X-Service-Confirm', 'privileged-default-role').send(body);

  it('fills a slot keyed by the SHA-256 of the key, holding neither the key nor its hash as a value', async () => {
    const k = await createApiKey(t, d);
    expect(await slot(k.key)).toBeNull();
    await register(t, k.key).expect(201);
    const value = (await slot(k.key))!;
    expect(JSON.parse(value)).toMatchObject({ id: k.id, tenantSlug: d.slug, tier: 'free' });
    expect(value).not.toContain(k.key);
    expect(value).not.toContain(sha256Hex(k.key));
    // an unknown key is never cached
    const unknown = `authp_${'x'.repeat(43)}`;
    expect((await register(t, unknown).expect(401)).body.code).toBe('auth/invalid_api_key');
    expect(await slot(unknown)).toBeNull();
  });

  it('a cached key and the rate limit of its route cost one Redis write: both reads leave together', async () => {
    const k = await createApiKey(t, d);
    await register(t, k.key).expect(201); // fills the slot
    const writes = await redisWrites(redis, () => register(t, k.key).expect(201));
    const prefix = redis.options.keyPrefix ?? '';
    const first = writes.findIndex((cmds) => cmds.some((args) => args[0] === 'get' && args[1] === `${prefix}apikey:${sha256Hex(k.key)}`));
    expect(first).toBeGreaterThanOrEqual(0);
    // the same write carries the count of register's per-address limit (the script of RateLimitGuard)
    const limiter = writes[first].find((args) => args[0] === 'evalsha' || args[0] === 'eval');
    expect(limiter?.some((a) => /\{rl:ip:[0-9a-f]{12}:register\}:hits$/.test(a))).toBe(true);
  });

  it('a rate-limited request never reaches PostgreSQL for an unknown key', async () => {
    const unknown = `authp_${'y'.repeat(43)}`;
    const ip = randomIp();
    const at = () => t.http().post('/v1/auth/register').set('X-API-Key', unknown).set('X-Forwarded-For', ip).send({ email: uniqueEmail(), password: STRONG_PASSWORD, consent: true });
    for (let i = 0; i < 5; i++) expect((await at().expect(401)).body.code).toBe('auth/invalid_api_key');
    // the API-key lookups that reach PostgreSQL
    const limited = await namedQueryParams(t.db, 'api_key_resolve', async () => expect((await at().expect(429)).body.code).toBe('rate_limit/exceeded'));
    expect(limited).toEqual([]);
    // the spy sees the lookups it should: a request the limiter lets through loads the key
    const through = await namedQueryParams(t.db, 'api_key_resolve', async () =>
      expect((await t.http().post('/v1/auth/register').set('X-API-Key', unknown).set('X-Forwarded-For', randomIp()).send({ email: uniqueEmail(), password: STRONG_PASSWORD, consent: true }).expect(401)).body.code).toBe(
        'auth/invalid_api_key',
      ),
    );
    expect(through).toEqual([sha256Hex(unknown)]);
  });

  it('a revoked key answers 401 at once on every API process, though both had it cached', async () => {
    const k = await createApiKey(t, d);
    await register(t, k.key).expect(201);
    await register(second, k.key).expect(201);
    await t.http().delete(`/v1/auth/dashboard/tenants/${d.slug}/api-keys/${k.id}`).set('Cookie', d.cookie).set('X-CSRF-Token', d.csrf).expect(200);
    for (const app of [t, second]) expect((await register(app, k.key).expect(401)).body.code).toBe('auth/invalid_api_key');
    expect(await slot(k.key)).toMatch(/^-/);
  });

  it('a guest-settings change through the dashboard shows at once for keys that were cached', async () => {
    const k = await createApiKey(t, d);
    await patchGuests({ anonymous_signins_enabled: true }).expect(200);
    await anon(t, k.key).expect(201);
    await anon(second, k.key).expect(201);
    await patchGuests({ anonymous_signins_enabled: false }).expect(200);
    for (const app of [t, second]) expect((await anon(app, k.key).expect(403)).body.code).toBe('anonymous/disabled');
    await patchGuests({ anonymous_signins_enabled: true }).expect(200);
    await anon(second, k.key).expect(201);
  });

  it('cli tenants:set-tier invalidates the tenant’s cached keys and agent clients', async () => {
    const other = await signupTenant(t);
    const k = await createApiKey(t, other);
    await register(t, k.key).expect(201);
    expect(JSON.parse((await slot(k.key))!).tier).toBe('free');
    // an agent client of the tenant, cached as the token endpoint reads it
    const agent = await createAgent(t.db, other.tenantId);
    expect((await t.app.get(AgentsService).findClient(agent.id))?.tenant_tier).toBe('free');
    expect(JSON.parse((await redis.get(`agentclient:${agent.id}`))!).tenant_tier).toBe('free');
    const io: CliIo = { out: () => undefined, err: () => undefined };
    expect(await runCli(['tenants:set-tier', other.slug, 'pro'], io)).toBe(0);
    expect(await slot(k.key)).toMatch(/^-/);
    expect(await redis.get(`agentclient:${agent.id}`)).toMatch(/^-/);
    expect((await t.app.get(AgentsService).findClient(agent.id))?.tenant_tier).toBe('pro');
    expect(JSON.parse((await redis.get(`agentclient:${agent.id}`))!).tenant_tier).toBe('pro');
    // the next request loads the key after the change and refills its slot at once (no run of
    // PostgreSQL reads for every request of the tenant until the tombstone expires)
    await register(t, k.key).expect(201);
    expect(JSON.parse((await slot(k.key))!).tier).toBe('pro');
  });

  it('cli tenants:set-tier that cannot tell Redis exits 1 and says so (the change is saved); the same tier again records nothing', async () => {
    const other = await signupTenant(t);
    const k = await createApiKey(t, other);
    await register(t, k.key).expect(201);
    const lines: string[] = [];
    const io: CliIo = { out: (l) => lines.push(l), err: (l) => lines.push(l) };
    const redisUrl = process.env.REDIS_URL;
    process.env.REDIS_URL = 'redis://127.0.0.1:1'; // nothing listens there
    resetConfigForTests();
    try {
      expect(await runCli(['tenants:set-tier', other.slug, 'pro'], io)).toBe(1);
    } finally {
      process.env.REDIS_URL = redisUrl;
      resetConfigForTests();
    }
    expect(lines.join('\n')).toMatch(/tier free -> pro is saved, but Redis could not be told, so the API may go on using tier free for up to \d+ s/);
    const [row] = await t.db.query<{ tier: string }>('SELECT tier FROM tenants WHERE id = $1', [other.tenantId]);
    expect(row.tier).toBe('pro');
    expect(JSON.parse((await slot(k.key))!).tier).toBe('free'); // the stale slot the message warns about
    // run again once Redis answers: the slot is invalidated, and no second tier_changed event
    lines.length = 0;
    expect(await runCli(['tenants:set-tier', other.slug, 'pro'], io)).toBe(0);
    expect(lines).toEqual([`tenant ${other.slug} (${other.tenantId}): tier pro (unchanged)`]);
    expect(await slot(k.key)).toMatch(/^-/);
    const audits = await t.db.query(`SELECT 1 FROM audit_events WHERE tenant_id = $1 AND type = 'tenant.tier_changed'`, [other.tenantId]);
    expect(audits).toHaveLength(1);
  });
  it('cli tenants:minor-protection switches the date_of_birth requirement, shown at once on keys that were cached, read-only in settings/security, audited once per change', async () => {
    const other = await signupTenant(t);
    const k = await createApiKey(t, other);
    await register(t, k.key).expect(201); // the key is cached without minor protection
    const lines: string[] = [];
    const io: CliIo = { out: (l) => lines.push(l), err: (l) => lines.push(l) };
    expect(await runCli(['tenants:minor-protection', other.slug, 'on'], io)).toBe(0);
    expect(lines).toEqual([`tenant ${other.slug} (${other.tenantId}): minor protection on`]);
    for (const app of [t, second]) expect((await register(app, k.key).expect(400)).body.code).toBe('user/date_of_birth_required');
    await t.http().post('/v1/auth/register').set('X-API-Key', k.key).set('X-Forwarded-For', randomIp()).send({ email: uniqueEmail(), password: STRONG_PASSWORD, consent: true, date_of_birth: '1990-01-31' }).expect(201);
    const settings = await t.http().get(`/v1/auth/dashboard/tenants/${other.slug}/settings/security`).set('Cookie', other.cookie).expect(200);
    expect(settings.body.minor_protection_enabled).toBe(true);
    // read-only there: a PATCH naming it is refused as any unknown property
    const patch = await t.http().patch(`/v1/auth/dashboard/tenants/${other.slug}/settings/security`).set('Cookie', other.cookie).set('X-CSRF-Token', other.csrf).send({ minor_protection_enabled: false }).expect(400);
    expect(patch.body.code).toBe('request/invalid');
    lines.length = 0;
    expect(await runCli(['tenants:minor-protection', other.slug, 'on'], io)).toBe(0);
    expect(lines).toEqual([`tenant ${other.slug} (${other.tenantId}): minor protection on (unchanged)`]);
    expect(await runCli(['tenants:minor-protection', other.slug, 'off'], io)).toBe(0);
    await register(t, k.key).expect(201);
    const audits = await t.db.query<{ metadata: Record<string, unknown>; actor_type: string }>(
      `SELECT metadata, actor_type FROM audit_events WHERE tenant_id = $1 AND type = 'tenant.minor_protection_changed' ORDER BY created_at`,
      [other.tenantId],
    );
    expect(audits).toEqual([
      { actor_type: 'system', metadata: { enabled: true, via: 'cli' } },
      { actor_type: 'system', metadata: { enabled: false, via: 'cli' } },
    ]);
    for (const argv of [['tenants:minor-protection', other.slug], ['tenants:minor-protection', other.slug, 'yes'], ['tenants:minor-protection', 'no-such-tenant', 'on']]) {
      expect(await runCli(argv, io)).toBe(1);
    }
  });
});
