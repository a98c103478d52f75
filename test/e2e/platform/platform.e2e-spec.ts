import { createTestApp, TestApp } from '../../setup/app';

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

  it('serves the OpenAPI document and the docs UI', async () => {
    const res = await t.http().get('/openapi.json').expect(200);
    expect(res.body.openapi).toMatch(/^3\./);
    await t.http().get('/docs').expect((r) => expect([200, 301, 302]).toContain(r.status));
  });

  it('sets helmet security headers', async () => {
    const res = await t.http().get('/health');
    expect(res.headers['x-content-type-options']).toBe('nosniff');
  });
});
