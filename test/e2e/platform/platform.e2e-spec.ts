import { connect } from 'net';
import { createTenant } from '../../factories/tenant.factory';
import { createTestApp, randomIp, STRONG_PASSWORD, TestApp, uniqueEmail } from '../../setup/app';

describe('platform: operations, discovery, error envelope', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(() => t.close());

  it('GET /health answers ok with an X-Request-Id', async () => {
    const res = await t.http().get('/health').expect(200);
    expect(res.body).toEqual({ status: 'ok' });
    expect(res.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('echoes a well-formed X-Request-Id and replaces a malformed one', async () => {
    const ok = await t.http().get('/health').set('X-Request-Id', 'abc-123');
    expect(ok.headers['x-request-id']).toBe('abc-123');
    const bad = await t.http().get('/health').set('X-Request-Id', 'bad id with spaces');
    expect(bad.headers['x-request-id']).not.toBe('bad id with spaces');
  });

  it('GET /ready checks PostgreSQL and Redis', async () => {
    const res = await t.http().get('/ready').expect(200);
    expect(res.body.info).toEqual({ postgres: { status: 'up' }, redis: { status: 'up' } });
  });

  it('unknown routes are problem+json 404', async () => {
    const res = await t.http().get('/v1/nope').expect(404);
    expect(res.headers['content-type']).toMatch(/application\/problem\+json/);
    expect(res.body).toMatchObject({ status: 404, code: 'request/not_found', type: 'about:blank' });
  });

  it('a known path asked with a method it does not take is 405 with Allow, not 404', async () => {
    const me = await t.http().delete('/v1/auth/me').expect(405);
    expect(me.headers['content-type']).toMatch(/application\/problem\+json/);
    expect(me.headers.allow).toBe('GET, HEAD');
    expect(me.body).toMatchObject({ status: 405, code: 'request/method_not_allowed' });
    // a path with a parameter: the agent routes of a tenant
    const agent = await t.http().put('/v1/auth/dashboard/tenants/some-slug/agents/9b2f4d56-1c1e-4e7b-9a54-2f1f4a6f0c11').send({}).expect(405);
    expect(agent.headers.allow).toBe('GET, HEAD, PATCH, DELETE');
    expect((await t.http().get('/v1/auth/register').expect(405)).headers.allow).toBe('POST');
    // under /oauth the RFC 6749 envelope
    const token = await t.http().get('/oauth/token').expect(405);
    expect(token.headers.allow).toBe('POST');
    // unknown paths stay 404, also an empty parameter or a trailing slash of a parametric path
    await t.http().delete('/v1/auth/nope').expect(404);
    for (const [method, path] of [
      ['get', '/v1/auth/dashboard/tenants//agents'],
      ['post', '/v1/auth/dashboard/tenants//agents'],
      ['head', '/v1/auth/dashboard/tenants//agents'],
      ['get', '/v1/auth/dashboard/tenants/acme/agents/'],
      ['delete', '/v1/auth/dashboard/tenants/acme/agents/'],
      ['get', '/v1/auth/dashboard/tenants/acme/api-keys/'],
      ['get', '/v1/auth/dashboard/tenants/acme/webhooks//deliveries'],
    ] as const) {
      const res = await t.http()[method](path);
      expect([method, path, res.status]).toEqual([method, path, 404]);
    }
  });

  it('publishes the JWKS and discovery documents', async () => {
    const jwks = await t.http().get('/.well-known/jwks.json').expect(200);
    expect(jwks.body.keys.length).toBeGreaterThanOrEqual(1);
    expect(jwks.body.keys[0]).toMatchObject({ kty: 'RSA', alg: 'RS256', use: 'sig' });
    expect(jwks.body.keys[0].kid).toBeTruthy();
    expect(jwks.body.keys[0].d).toBeUndefined();
    const oidc = await t.http().get('/.well-known/openid-configuration').expect(200);
    expect(oidc.body.issuer).toBe(process.env.PUBLIC_BASE_URL);
    expect(oidc.body.jwks_uri).toMatch(/\/\.well-known\/jwks\.json$/);
    const as = await t.http().get('/.well-known/oauth-authorization-server').expect(200);
    expect(as.body.token_endpoint).toMatch(/\/oauth\/token$/);
  });

  it('serves /metrics with per-route request counts and latency', async () => {
    await t.http().get('/health');
    const res = await t.http().get('/metrics').expect(200);
    expect(res.text).toContain('http_requests_total');
    expect(res.text).toContain('http_request_duration_seconds_bucket');
    expect(res.text).toMatch(/route="\/health"/);
  });

  it('METRICS_ENABLED=false turns /metrics off: 404 like an unknown path', async () => {
    const off = await createTestApp({ METRICS_ENABLED: 'false' });
    try {
      const res = await off.http().get('/metrics').expect(404);
      expect(res.body.code).toBe('request/not_found');
      expect(res.text).not.toContain('process_cpu');
    } finally {
      await off.close();
    }
  });

  it('METRICS_TOKEN: /metrics answers only the bearer of that token (401 with a Bearer challenge otherwise)', async () => {
    const token = 'm'.repeat(24) + 'Q7x-secret-scrape';
    const guarded = await createTestApp({ METRICS_TOKEN: token });
    try {
      const none = await guarded.http().get('/metrics').expect(401);
      expect(none.body.code).toBe('auth/unauthorized');
      expect(none.headers['www-authenticate']).toBe('Bearer realm="metrics"');
      expect(none.text).not.toContain('http_requests_total');
      for (const authorization of [`Bearer ${token}x`, `Bearer ${token.slice(0, -1)}`, token, `Basic ${token}`, `Bearer\t${token}`]) {
        const bad = await guarded.http().get('/metrics').set('Authorization', authorization).expect(401);
        expect(bad.text).not.toContain(token);
      }
      const ok = await guarded.http().get('/metrics').set('Authorization', `Bearer ${token}`).expect(200);
      expect(ok.text).toContain('http_requests_total');
      // the scheme name is case-insensitive (RFC 9110 section 11.1), then one or more spaces (RFC 6750 section 2.1)
      for (const scheme of ['bearer', 'BEARER', 'Bearer ']) await guarded.http().get('/metrics').set('Authorization', `${scheme} ${token}`).expect(200);
      // the other operations endpoints stay open
      await guarded.http().get('/health').expect(200);
    } finally {
      await guarded.close();
    }
  });

  it('counts each request once per method, route pattern and status; unknown paths share one series', async () => {
    const count = async (labels: string) => {
      const text = (await t.http().get('/metrics').expect(200)).text;
      const line = text.split('\n').find((l) => l.startsWith(`http_requests_total{${labels}}`));
      return line ? Number(line.split(' ').pop()) : 0;
    };
    const before = await count('method="GET",route="/health",status="200"');
    const missBefore = await count('method="GET",route="unmatched",status="404"');
    for (let i = 0; i < 3; i++) await t.http().get('/health').expect(200);
    await t.http().get(`/no-such-path-${Date.now()}`).expect(404);
    await t.http().get(`/another-${Date.now()}`).expect(404);
    expect(await count('method="GET",route="/health",status="200"')).toBe(before + 3);
    expect(await count('method="GET",route="unmatched",status="404"')).toBe(missBefore + 2);
  });

  /** The value of one series on /metrics (`name{labels}` as written there), 0 when it is absent. */
  const series = async (name: string, app: TestApp = t) => {
    const text = (await app.http().get('/metrics').expect(200)).text;
    const line = text.split('\n').find((l) => l.startsWith(`${name} `));
    return line ? Number(line.split(' ').pop()) : 0;
  };

  it('counts requests answered before Fastify (431 header overflow, CONNECT) in http_requests_total with route "unparsed"', async () => {
    const server = t.app.getHttpServer();
    if (!server.listening) await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    const port = (server.address() as { port: number }).port;
    const raw = (request: string) =>
      new Promise<string>((resolve) => {
        const s = connect(port, '127.0.0.1', () => s.write(request));
        let b = '';
        s.on('data', (d) => (b += d.toString()));
        s.on('close', () => resolve(b));
        s.on('error', () => resolve(b));
      });
    const overflow = 'http_requests_total{method="GET",route="unparsed",status="431"}';
    const tunnel = 'http_requests_total{method="CONNECT",route="unparsed",status="405"}';
    const [o0, c0] = [await series(overflow), await series(tunnel)];
    expect(await raw(`GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(40_000)}\r\n\r\n`)).toMatch(/^HTTP\/1.1 431/);
    expect(await raw('CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n')).toMatch(/^HTTP\/1.1 405/);
    expect([await series(overflow), await series(tunnel)]).toEqual([o0 + 1, c0 + 1]);
  });

  it('/metrics counts sign-in outcomes by method and 429s by limiter, with no tenant, user or address in any label', async () => {
    const tenant = await createTenant(t.db, { tier: 'pro' });
    await t.db.query(`UPDATE tenants SET magic_link_enabled = true, email_otp_enabled = true WHERE id = $1`, [tenant.id]);
    await t.tenantChanged(tenant.id);
    const email = uniqueEmail('counted');
    await t.http().post('/v1/auth/register').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', randomIp()).send({ email, password: STRONG_PASSWORD, consent: true }).expect(201);
    const failures = ['magic_link', 'email_otp', 'mfa'].map((m) => `authp_sign_ins_total{method="${m}",outcome="failure"}`);
    const throttled = 'authp_rate_limited_total{limiter="failed_sign_in:user"}';
    const before = await Promise.all([...failures, throttled].map((n) => series(n)));
    const post = (path: string, body: object, ip = randomIp()) => t.http().post(path).set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', ip).send(body);
    await post('/v1/auth/magic-link/verify', { token: 'not-a-link' }).expect(400);
    await post('/v1/auth/email-otp/verify', { email, code: '000000' }).expect(401);
    await post('/v1/auth/mfa/verify', { mfa_challenge_token: 'not-a-challenge', code: '000000' }).expect(401);
    // wrong passwords from one address until the failed sign-in throttle refuses (LOGIN_FAILURES_PER_ACCOUNT_IP)
    const ip = randomIp();
    let status = 0;
    for (let i = 0; i < 8 && status !== 429; i++) status = (await post('/v1/auth/login', { email, password: 'wrong horse battery staple' }, ip)).status;
    expect(status).toBe(429);
    expect(await Promise.all([...failures, throttled].map((n) => series(n)))).toEqual(before.map((n) => n + 1));
    // the password sign-in: a wrong password is a failure, the right one a success, the 429 throttled
    const password = ['failure', 'success', 'throttled'].map((o) => `authp_sign_ins_total{method="password",outcome="${o}"}`);
    const pw = await Promise.all(password.map((n) => series(n)));
    await post('/v1/auth/login', { email, password: 'wrong horse battery staple' }).expect(401);
    await post('/v1/auth/login', { email, password: STRONG_PASSWORD }).expect(200);
    expect((await post('/v1/auth/login', { email, password: STRONG_PASSWORD }, ip)).status).toBe(429);
    expect(await Promise.all(password.map((n) => series(n)))).toEqual([pw[0] + 1, pw[1] + 1, pw[2] + 1]);
    // every series from the start (alerts on a rate work from the first event), none naming a tenant or user
    const text = (await t.http().get('/metrics').expect(200)).text;
    for (const outcome of ['success', 'failure', 'throttled', 'mfa_required']) expect(text).toContain(`authp_sign_ins_total{method="email_otp",outcome="${outcome}"}`);
    expect(text).toContain('# TYPE authp_token_exchange_total counter');
    expect(text).toContain('# TYPE authp_refresh_reuse_total counter');
    const business = text.split('\n').filter((l) => l.startsWith('authp_sign_ins') || l.startsWith('authp_rate_limited') || l.startsWith('authp_token_exchange'));
    expect(business.join('\n')).not.toMatch(new RegExp(`${tenant.id}|${tenant.slug}|${email}|${ip}`));
  });

  it('/ready answers within its 2 s bound while every connection of the pool is held: the probe has its own connection', async () => {
    const small = await createTestApp({ DATABASE_POOL_SIZE: '2' });
    const held = await Promise.all([small.db.pool.connect(), small.db.pool.connect()]);
    try {
      const started = Date.now();
      const res = await small.http().get('/ready').timeout(15_000);
      // PostgreSQL answers: a busy pool is not a database away (a request still waits for a slot)
      expect([res.status, res.body.info?.postgres]).toEqual([200, { status: 'up' }]);
      expect(Date.now() - started).toBeLessThan(3_000);
    } finally {
      held.forEach((c) => c.release());
      await small.close();
    }
  }, 30_000);

  it('serves the OpenAPI document and the docs UI', async () => {
    const res = await t.http().get('/openapi.json').expect(200);
    expect(res.body.openapi).toMatch(/^3\./);
    await t.http().get('/docs').expect((r) => expect([200, 301, 302]).toContain(r.status));
    // its page, reached over plain http (a development host, an internal address), loads its own
    // scripts: no CSP upgrade-insecure-requests, which would fetch them over https (a blank page)
    const page = await t.http().get('/docs').redirects(2).expect(200);
    expect(page.text).toContain('swagger-ui-bundle.js');
    expect(page.headers['content-security-policy']).toContain("script-src 'self'");
    expect(page.headers['content-security-policy']).not.toContain('upgrade-insecure-requests');
  });

  it('sets helmet security headers', async () => {
    const res = await t.http().get('/health');
    expect(res.headers['x-content-type-options']).toBe('nosniff');
  });
});
