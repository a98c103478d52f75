import { spawn } from 'child_process';
import { randomUUID } from 'crypto';
import { logDestination } from '../../../src/shared/http/logger';
import type { AgentFixture } from '../../factories/agent.factory';
import type { TenantFixture } from '../../factories/tenant.factory';
import type { TestApp } from '../../setup/app';
import { ownRedis } from '../../setup/own-redis';
import { withEnv } from '../../setup/with-env';

/**
 * What the API writes to its log (api-contract.md: every 5xx is logged with its request id), read
 * from the lines themselves: the app logs through a stream of the test's own. `loggerModule()`
 * reads its destination and LOG_LEVEL when the API module is imported, so everything that imports
 * it is imported only once the stream is set (dynamic imports below).
 */
type LogLine = { level?: number; msg?: string; request_id?: string; path?: string; err?: { message?: string; type?: string }; req?: { id?: string; url?: string }; tenant_id?: string; route?: string; service?: string };

const lines: LogLine[] = [];
/** the same lines as written (JSON.parse keeps one of two equal keys) */
const rawLines: string[] = [];

const eventually = async (cond: () => boolean, timeoutMs: number, what: string): Promise<void> => {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
};
const eventuallyAsync = async (cond: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> => {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
};

/** The error lines (level 50) that name a request id. */
const errorLinesOf = (rid: string) => lines.filter((l) => l.level === 50 && JSON.stringify(l).includes(rid));

describe('error and request logs', () => {
  let t: TestApp;
  let server: ReturnType<typeof spawn>;
  let ping: () => Promise<boolean>;
  let tenant: TenantFixture;
  let agent: AgentFixture;
  let user: { email: string; access_token: string };
  let helpers: typeof import('../oauth/oauth-helpers');
  let appHelpers: typeof import('../../setup/app');

  beforeAll(async () => {
    const own = await ownRedis();
    ping = own.ping;
    server = own.startRedis();
    await eventuallyAsync(ping, 10_000, 'redis-server to start');

    logDestination.stream = {
      write: (chunk: string) => {
        for (const l of chunk.split('\n')) {
          if (!l) continue;
          lines.push(JSON.parse(l) as LogLine);
          rawLines.push(l);
        }
      },
    };
    const env: Record<string, string> = { LOG_LEVEL: 'info', REDIS_URL: `redis://127.0.0.1:${own.port}`, REDIS_COMMAND_TIMEOUT_MS: '500' };
    await withEnv(env, async () => {
      const { createApiApp } = await import('../../../src/app.factory');
      const { Db } = await import('../../../src/shared/db/db.service');
      const { default: request } = await import('supertest');
      // as createTestApp, but with the application's own logger (createTestApp silences it)
      const app = await createApiApp({ logger: true });
      await app.init();
      await app.getHttpAdapter().getInstance().ready();
      // what listen() does in main: Nest's buffered logger writes from now on
      app.flushLogs();
      t = { app, http: () => request(app.getHttpServer()), db: app.get(Db), tenantChanged: async () => undefined, close: () => app.close() };
    });
    helpers = await import('../oauth/oauth-helpers');
    appHelpers = await import('../../setup/app');
    const { createTenant } = await import('../../factories/tenant.factory');
    const { createAgent } = await import('../../factories/agent.factory');
    tenant = await createTenant(t.db, { tier: 'pro' });
    agent = await createAgent(t.db, tenant.id);
    user = await helpers.registerUser(t, tenant);
  }, 60_000);

  afterAll(async () => {
    server?.kill('SIGCONT');
    await t?.close();
    server?.kill('SIGKILL');
    logDestination.stream = undefined;
  });

  /** Runs `fn` with the test's Redis stalled (SIGSTOP: commands time out after 500 ms), then waits until it answers again. */
  async function withRedisStalled(fn: () => Promise<void>): Promise<void> {
    server.kill('SIGSTOP');
    try {
      await fn();
    } finally {
      server.kill('SIGCONT');
    }
    await eventuallyAsync(ping, 10_000, 'Redis to answer again');
    const login = () => t.http().post('/v1/auth/login').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', appHelpers.randomIp()).send({ email: user.email, password: appHelpers.STRONG_PASSWORD });
    await eventuallyAsync(async () => (await login()).status === 200, 10_000, 'sign-in once Redis answers');
  }

  it('an OAuth 503 (temporarily_unavailable) is logged once at error level, with its request id and the Redis failure behind it', async () => {
    const st = (await helpers.login(t, tenant, user.email)).access_token;
    const agentToken = (await helpers.postToken(t, agent, helpers.exchangeBody(st)).expect(200)).body.access_token as string;
    const st2 = (await helpers.login(t, tenant, user.email)).access_token;
    const rids = { introspect: `oauth-introspect-${randomUUID()}`, revoke: `oauth-revoke-${randomUUID()}`, token: `oauth-token-${randomUUID()}` };
    const forms: Record<string, Record<string, string>> = { introspect: { token: agentToken }, revoke: { token: agentToken }, token: helpers.exchangeBody(st2) };
    await withRedisStalled(async () => {
      for (const [endpoint, rid] of Object.entries(rids)) {
        const res = await t.http().post(`/oauth/${endpoint}`).type('form').set('Authorization', helpers.basic(agent.id, agent.secret)).set('X-Request-Id', rid).send(forms[endpoint]).timeout(5000);
        // the response is unchanged: the RFC 6749 envelope, no cause in it
        expect([res.status, res.headers['retry-after']]).toEqual([503, '5']);
        expect(res.body).toEqual({ error: 'temporarily_unavailable', error_description: 'The service is temporarily unavailable; retry later' });
      }
    });
    for (const [endpoint, rid] of Object.entries(rids)) {
      const errors = errorLinesOf(rid);
      expect(errors).toHaveLength(1);
      expect(errors[0]).toMatchObject({ msg: 'server error', request_id: rid, path: `/oauth/${endpoint}` });
      // the cause: the kernel's 503 (and the Redis failure behind it where its service keeps it)
      expect(errors[0].err?.message).toMatch(/^The service is temporarily unavailable; retry later: \w.* unavailable/);
    }
    // a resource server introspecting a user's token (X-API-Key): the revocation state in Redis
    // is what failed, and the error line says how
    const rid = `oauth-introspect-key-${randomUUID()}`;
    await withRedisStalled(async () => {
      const res = await t.http().post('/oauth/introspect').type('form').set('X-API-Key', tenant.apiKey).set('X-Request-Id', rid).send({ token: user.access_token }).timeout(5000);
      expect(res.status).toBe(503);
      expect(res.body).toEqual({ error: 'temporarily_unavailable', error_description: 'The service is temporarily unavailable; retry later' });
    });
    const errors = errorLinesOf(rid);
    expect(errors).toHaveLength(1);
    expect(errors[0].err?.message).toMatch(/^The service is temporarily unavailable; retry later: \w.* unavailable: Command timed out$/);
  }, 60_000);

  it('a /v1 503 of the rate limiter or the revocation state names the Redis failure in its one error line', async () => {
    const rids = { login: `v1-login-${randomUUID()}`, me: `v1-me-${randomUUID()}` };
    await withRedisStalled(async () => {
      const login = await t
        .http()
        .post('/v1/auth/login')
        .set('X-API-Key', tenant.apiKey)
        .set('X-Forwarded-For', appHelpers.randomIp())
        .set('X-Request-Id', rids.login)
        .send({ email: user.email, password: appHelpers.STRONG_PASSWORD })
        .timeout(5000);
      expect([login.status, login.body.code]).toEqual([503, 'server/unavailable']);
      expect(JSON.stringify(login.body)).not.toContain('timed out');
      const me = await t.http().get('/v1/auth/me').set('Authorization', `Bearer ${user.access_token}`).set('X-Request-Id', rids.me).timeout(5000);
      expect([me.status, me.body.code]).toEqual([503, 'server/unavailable']);
    });
    const login = errorLinesOf(rids.login);
    expect(login).toHaveLength(1);
    expect(login[0]).toMatchObject({ msg: 'server error', request_id: rids.login, path: '/v1/auth/login' });
    expect(login[0].err?.message).toBe('Rate limiter unavailable: Command timed out');
    const me = errorLinesOf(rids.me);
    expect(me).toHaveLength(1);
    expect(me[0]).toMatchObject({ msg: 'server error', request_id: rids.me, path: '/v1/auth/me' });
    expect(me[0].err?.message).toMatch(/unavailable: Command timed out$/);
  }, 60_000);

  it('/health, /ready and /metrics write no request line; other routes do, with their path', async () => {
    const probes: Record<string, string> = {};
    for (const path of ['/health', '/ready', '/metrics', '/health?x=1']) {
      const rid = `probe-${randomUUID()}`;
      probes[rid] = path;
      await t.http().get(path).set('X-Request-Id', rid);
    }
    const marker = `marker-${randomUUID()}`;
    await t.http().get('/v1/no-such-route').set('X-Request-Id', marker).expect(404);
    await eventually(() => lines.some((l) => l.req?.id === marker), 5_000, 'the request line of the marker request');
    expect(lines.find((l) => l.req?.id === marker)?.req?.url).toBe('/v1/no-such-route');
    const probeLines = lines.filter((l) => Object.keys(probes).some((rid) => JSON.stringify(l).includes(rid)));
    expect(probeLines).toEqual([]);
  });

  it('a request line names the tenant a guard resolved (API key or bearer token, never the key or token) and the route template', async () => {
    const rids = { key: `tenant-key-${randomUUID()}`, bearer: `tenant-bearer-${randomUUID()}`, none: `tenant-none-${randomUUID()}` };
    // a wrong password: the X-API-Key is redacted and the path names no tenant
    await t.http().post('/v1/auth/login').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', appHelpers.randomIp()).set('X-Request-Id', rids.key)
      .send({ email: 'nobody@example.com', password: 'wrong horse battery staple' }).expect(401);
    await t.http().get('/v1/auth/me').set('Authorization', `Bearer ${user.access_token}`).set('X-Request-Id', rids.bearer).expect(200);
    // no credential the guard accepts: no tenant on the line
    await t.http().post('/v1/auth/login').set('X-API-Key', 'authp_made-up').set('X-Request-Id', rids.none).send({ email: 'x@example.com', password: 'x' }).expect(401);
    const lineOf = (rid: string) => lines.find((l) => l.req?.id === rid && l.msg === 'request completed');
    await eventually(() => Object.values(rids).every((rid) => lineOf(rid)), 5_000, 'the three request lines');
    expect(lineOf(rids.key)).toMatchObject({ service: 'authp', tenant_id: tenant.id, route: '/v1/auth/login', req: { url: '/v1/auth/login' } });
    expect(lineOf(rids.bearer)).toMatchObject({ service: 'authp', tenant_id: tenant.id, route: '/v1/auth/me' });
    expect(lineOf(rids.none)).toMatchObject({ service: 'authp', route: '/v1/auth/login' });
    expect(lineOf(rids.none)).not.toHaveProperty('tenant_id');
    const written = JSON.stringify(Object.values(rids).map(lineOf));
    expect(written).not.toContain(tenant.apiKey);
    expect(written).not.toContain(user.access_token.split('.')[2]);
    // each field once on the line as written (the request's logger already carries `service`)
    const raw = rawLines.find((l) => l.includes(rids.key) && l.includes('request completed'))!;
    expect([raw.match(/"service"/g)?.length, raw.match(/"tenant_id"/g)?.length, raw.match(/"route"/g)?.length]).toEqual([1, 1, 1]);
  });
});
