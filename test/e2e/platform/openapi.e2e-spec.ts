import { APP_CONFIG, AppConfig } from '../../../src/config/config';
import { createTestApp, TestApp } from '../../setup/app';

interface Schema {
  $ref?: string;
  type?: string;
  properties?: Record<string, Schema>;
  required?: string[];
  items?: Schema;
  allOf?: Schema[];
  oneOf?: Schema[];
  additionalProperties?: boolean | Schema;
  format?: string;
}
interface Response {
  description?: string;
  headers?: Record<string, { description?: string }>;
  content?: Record<string, { schema?: Schema; examples?: Record<string, { value: { code?: string; status?: number } }> }>;
}
interface Operation {
  parameters?: { name: string; in: string; required?: boolean; schema?: Schema }[];
  responses: Record<string, Response>;
  security?: Record<string, string[]>[];
  requestBody?: { required?: boolean; content?: Record<string, { schema?: Schema }> };
}
interface OpenApiDoc {
  openapi: string;
  info: { description: string };
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, Schema>; securitySchemes?: Record<string, { type: string; in?: string; name?: string; scheme?: string }> };
}

const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options'];
const PROBLEM_JSON = 'application/problem+json';

/** The OpenAPI document: every response and error of every operation documented (contract "Operations"). */
describe('platform: the OpenAPI document', () => {
  let t: TestApp;
  let doc: OpenApiDoc;
  beforeAll(async () => {
    t = await createTestApp();
    doc = (await t.http().get('/openapi.json').expect(200)).body;
  });
  afterAll(() => t.close());

  const operations = (): [string, string, Operation][] =>
    Object.entries(doc.paths).flatMap(([path, item]) =>
      Object.entries(item)
        .filter(([m]) => METHODS.includes(m))
        .map(([m, op]) => [path, m, op] as [string, string, Operation]),
    );

  /** Follows $ref, allOf and oneOf (first branch) down to a schema with properties. */
  const resolve = (s: Schema | undefined): Schema => {
    if (!s) return {};
    if (s.$ref) return resolve(doc.components.schemas[s.$ref.replace('#/components/schemas/', '')]);
    if (s.allOf) {
      const parts = s.allOf.map(resolve);
      return {
        type: 'object',
        properties: Object.assign({}, ...parts.map((p) => p.properties ?? {}), s.properties ?? {}),
        required: [...parts.flatMap((p) => p.required ?? []), ...(s.required ?? [])],
      };
    }
    return s;
  };

  const jsonSchema = (r: Response | undefined): Schema => resolve(r?.content?.['application/json']?.schema);

  it('is an OpenAPI 3 document with operations', () => {
    expect(doc.openapi).toMatch(/^3\./);
    expect(operations().length).toBeGreaterThan(50);
  });

  it('documents the operations routes the contract lists: /health, /ready and /metrics (Prometheus text, 401 without its token)', () => {
    for (const path of ['/health', '/ready', '/metrics']) expect(doc.paths[path]?.get).toBeDefined();
    const metrics = doc.paths['/metrics'].get;
    expect(Object.keys(metrics.responses['200'].content ?? {})).toEqual(['text/plain']);
    expect(metrics.responses['401']).toBeDefined();
    // the token header is needed only when METRICS_TOKEN is set
    expect((metrics.parameters ?? []).filter((p: { in: string; required?: boolean }) => p.in === 'header' && p.required)).toEqual([]);
  });

  it('requires X-CSRF-Token on every state-changing dashboard operation, and does not list it on reads', () => {
    let writes = 0;
    for (const [path, ops] of Object.entries(doc.paths as Record<string, Record<string, { parameters?: { name: string; in: string; required?: boolean }[] }>>)) {
      for (const [method, op] of Object.entries(ops)) {
        const csrf = (op.parameters ?? []).filter((p) => p.in === 'header' && p.name.toLowerCase() === 'x-csrf-token');
        if (method === 'get') expect({ path, csrf }).toEqual({ path, csrf: [] });
        else if (path.startsWith('/v1/auth/dashboard/tenants/')) {
          expect({ path, method, required: csrf.map((p) => p.required) }).toEqual({ path, method, required: [true] });
          writes++;
        }
      }
    }
    expect(writes).toBeGreaterThan(20);
  });

  it('states the spec 2 constraints of array items and consents in the schemas, not only in descriptions', () => {
    const props = (name: string) => (doc.components.schemas[name] as { properties: Record<string, Record<string, unknown>> }).properties;
    expect(props('UpdateSecuritySettingsDto').sms_allowed_countries.items).toEqual({ type: 'string', pattern: '^[A-Z]{2}$' });
    for (const list of ['allowlist', 'blocklist']) expect(props('PutEmailDomainsDto')[list].items).toEqual({ type: 'string', minLength: 1, maxLength: 253 });
    for (const [dto, field] of [['SignupRequestDto', 'consent_terms'], ['SignupRequestDto', 'consent_privacy'], ['RegisterRequestDto', 'consent']]) {
      expect(props(dto)[field]).toMatchObject({ type: 'boolean', enum: [true] });
    }
    for (const field of ['scopes', 'grant_types']) expect(props('RegisterAgentRequestDto')[field].uniqueItems).toBe(true);
    const scopeToken = { type: 'string', minLength: 1, maxLength: 128, pattern: '^[\\x21\\x23-\\x5B\\x5D-\\x7E]+$' };
    expect(props('RegisterAgentRequestDto').scopes.items).toEqual(scopeToken);
    expect(props('CreateOAuthClientRequestDto').scopes.items).toEqual(scopeToken);
    for (const field of ['scopes', 'grant_types', 'redirect_uris']) expect(props('CreateOAuthClientRequestDto')[field].uniqueItems).toBe(true);
    expect(props('CreateOAuthClientRequestDto').redirect_uris.items).toEqual({ type: 'string', format: 'uri', maxLength: 2048 });
    expect(props('TokenRequestDto').token_type_hint.enum).toBeUndefined(); // a hint: other values are ignored (RFC 7009 2.1)
  });

  it('documents a success response for every operation: a 2xx with content, or an explicit no-content answer', () => {
    const missing = operations()
      .filter(([, , op]) => {
        const ok = Object.entries(op.responses ?? {}).filter(([s]) => /^2\d\d$/.test(s));
        return !ok.some(([s, r]) => (r.content && Object.keys(r.content).length > 0) || s === '204' || /empty body/i.test(r.description ?? ''));
      })
      .map(([p, m]) => `${m.toUpperCase()} ${p}`);
    expect(missing).toEqual([]);
  });

  it('declares every path parameter of every operation (string or declared type)', () => {
    const problems: string[] = [];
    for (const [path, m, op] of operations()) {
      const names = [...path.matchAll(/\{([^}]+)\}/g)].map((x) => x[1]);
      for (const name of names) {
        const p = op.parameters?.filter((x) => x.in === 'path' && x.name === name) ?? [];
        if (p.length !== 1 || !p[0].required || !p[0].schema?.type) problems.push(`${m.toUpperCase()} ${path}: {${name}}`);
      }
    }
    expect(problems).toEqual([]);
    const slug = doc.paths['/v1/auth/dashboard/tenants/{slug}/settings/anonymous'].get.parameters?.find((x) => x.name === 'slug');
    expect(slug).toMatchObject({ in: 'path', required: true, schema: { type: 'string' } });
  });

  it('declares cursor and limit on every cursor-paginated list', () => {
    for (const path of ['/v1/auth/dashboard/tenants/{slug}/api-keys', '/v1/auth/dashboard/tenants/{slug}/webhooks', '/v1/auth/dashboard/tenants/{slug}/webhooks/{id}/deliveries', '/v1/auth/dashboard/tenants/{slug}/agents']) {
      const names = (doc.paths[path].get.parameters ?? []).filter((x) => x.in === 'query').map((x) => x.name);
      expect([path, names]).toEqual([path, expect.arrayContaining(['cursor', 'limit'])]);
    }
  });

  it('documents guest sign-in: 201 with the spec 2.3 fields, errors 401, 403 and 429', () => {
    const op = doc.paths['/v1/auth/anonymous'].post;
    const body = jsonSchema(op.responses['201']);
    for (const f of ['access_token', 'refresh_token', 'expires_in', 'token_type', 'user']) expect(body.required).toContain(f);
    expect(body.properties?.expires_in.type).toBe('integer');
    const user = resolve(body.properties?.user);
    expect(Object.keys(user.properties ?? {}).sort()).toEqual(['created_at', 'id', 'is_anonymous']);
    expect(user.required?.sort()).toEqual(['created_at', 'id', 'is_anonymous']);
    for (const s of ['401', '403', '429']) expect(op.responses[s]?.content?.[PROBLEM_JSON]).toBeDefined();
    const codes = (s: string) => Object.keys(op.responses[s].content![PROBLEM_JSON].examples ?? {});
    expect(codes('401')).toContain('auth/invalid_api_key');
    expect(codes('403')).toEqual(expect.arrayContaining(['anonymous/disabled', 'anonymous/mau_exhausted']));
    expect(codes('429')).toContain('anonymous/rate_limited');
    expect(op.responses['403'].description).toMatch(/anonymous\/disabled/);
    expect(Object.keys((op.responses['429'] as { headers?: object }).headers ?? {})).toEqual(expect.arrayContaining(['Retry-After', 'X-Service-Docs']));
  });

  it('carries the rate-limit table, anchored where every 429 X-Service-Docs points, with the invitation-accept and email-code rows', () => {
    const c: AppConfig = t.app.get(APP_CONFIG);
    const text = doc.info.description;
    // Swagger UI renders headings without ids: the anchor is an element of its own
    expect(c.RATE_LIMIT_DOCS_URL.endsWith('/docs#rate-limits')).toBe(true);
    expect(text).toContain('<a id="rate-limits"></a>\n\n## Rate limits\n');
    const rows = text.split('\n').filter((l) => l.startsWith('| '));
    expect(rows).toContainEqual(expect.stringMatching(new RegExp(`^\\| POST /v1/auth/dashboard/invites/accept per client address .*\\| ${c.RATE_LIMIT_SIGNUP_PER_MIN * 4}/min \\| rate_limit/exceeded \\|$`)));
    expect(rows).toContainEqual(
      expect.stringMatching(new RegExp(`^\\| wrong email codes .*\\| ${c.EMAIL_CODE_FAILURES_PER_ADDRESS} per ${c.EMAIL_CODE_FAILURE_WINDOW_SECONDS} s \\| auth/login_throttled \\|$`)),
    );
  });

  it('documents the token responses of register, login, refresh and the current user', () => {
    const tokenFields = ['access_token', 'refresh_token', 'expires_in', 'token_type', 'user'];
    const register = jsonSchema(doc.paths['/v1/auth/register'].post.responses['201']);
    const refresh = jsonSchema(doc.paths['/v1/auth/refresh'].post.responses['200']);
    for (const s of [register, refresh]) {
      expect(s.required).toEqual(expect.arrayContaining(tokenFields));
      expect(Object.keys(resolve(s.properties?.user).properties ?? {})).toEqual(
        expect.arrayContaining(['id', 'email', 'email_verified', 'is_anonymous', 'created_at']),
      );
    }
    // every field a webhook delivery answers is there, null or not
    expect(doc.components.schemas.WebhookDeliveryResponseDto?.required).toEqual(expect.arrayContaining(['next_attempt_at', 'delivered_at', 'failed_at', 'last_attempt_at']));
    // the MFA step that finishes a passwordless sign-in answers its oauth_params too
    const mfaVerify = jsonSchema(doc.paths['/v1/auth/mfa/verify'].post.responses['200']);
    expect(mfaVerify.required).toEqual(expect.arrayContaining(tokenFields));
    expect(Object.keys(mfaVerify.properties ?? {})).toContain('oauth_params');
    const login = doc.paths['/v1/auth/login'].post.responses['200'].content!['application/json'].schema!;
    const branches = (login.oneOf ?? []).map(resolve);
    expect(branches.some((b) => b.required?.includes('access_token'))).toBe(true);
    expect(branches.some((b) => b.required?.includes('mfa_challenge_token'))).toBe(true);
    const me = jsonSchema(doc.paths['/v1/auth/me'].get.responses['200']);
    expect(me.required).toEqual(
      expect.arrayContaining(['id', 'email', 'email_verified', 'is_anonymous', 'role', 'created_at', 'last_sign_in_at']),
    );
    expect(doc.paths['/v1/auth/me'].get.responses['401'].content?.[PROBLEM_JSON]).toBeDefined();
  });

  it('documents 403 mfa/enrollment_required on every route that mints user tokens under the MFA policy (sign-in, refresh, passwordless, step-up)', () => {
    const routes = [
      '/v1/auth/login',
      '/v1/auth/refresh',
      '/v1/auth/magic-link/verify',
      '/v1/auth/email-otp/verify',
      '/v1/auth/step-up/password',
      '/v1/auth/step-up/magic-link/verify',
      '/v1/auth/step-up/email-otp/verify',
    ];
    const missing = routes.filter((path) => !Object.keys(doc.paths[path].post.responses['403']?.content?.[PROBLEM_JSON]?.examples ?? {}).includes('mfa/enrollment_required'));
    expect(missing).toEqual([]);
  });

  it('documents the anonymous settings: integer retention, PATCH 409 confirmation_required', () => {
    const path = doc.paths['/v1/auth/dashboard/tenants/{slug}/settings/anonymous'];
    for (const op of [path.get, path.patch]) {
      const s = jsonSchema(op.responses['200']);
      expect(s.required).toEqual(expect.arrayContaining(['anonymous_signins_enabled', 'anonymous_user_ttl_days', 'default_user_role']));
      expect(s.properties?.anonymous_user_ttl_days.type).toBe('integer');
    }
    expect(doc.components.schemas.UpdateAnonymousSettingsDto.properties?.anonymous_user_ttl_days.type).toBe('integer');
    const conflict = path.patch.responses['409'];
    expect(conflict?.content?.[PROBLEM_JSON]).toBeDefined();
    expect(Object.keys(conflict.content![PROBLEM_JSON].examples ?? {})).toContain('anonymous/confirmation_required');
    expect(path.patch.responses['403']?.content?.[PROBLEM_JSON]).toBeDefined();
  });

  it('answers errors of non-/oauth routes as problem+json with the shared schema, /oauth errors in the RFC 6749 envelope', () => {
    const wrong: string[] = [];
    for (const [path, m, op] of operations()) {
      for (const [status, r] of Object.entries(op.responses)) {
        if (!/^[45]\d\d$/.test(status)) continue;
        const types = Object.keys(r.content ?? {});
        const where = `${m.toUpperCase()} ${path} ${status}`;
        if (path.startsWith('/oauth/')) {
          if (types.join() !== 'application/json' || r.content!['application/json'].schema?.$ref !== '#/components/schemas/OAuthErrorDto') wrong.push(where);
        } else {
          const c = r.content?.[PROBLEM_JSON];
          if (types.join() !== PROBLEM_JSON || c?.schema?.$ref !== '#/components/schemas/ProblemDto') wrong.push(where);
          // each example is keyed by its code and carries the status it is listed under
          else for (const [code, ex] of Object.entries(c.examples ?? {})) if (ex.value.code !== code || String(ex.value.status) !== status) wrong.push(`${where} ${code}`);
        }
      }
    }
    expect(wrong).toEqual([]);
    const problem = doc.components.schemas.ProblemDto;
    expect(problem.required).toEqual(expect.arrayContaining(['type', 'title', 'status', 'code', 'request_id']));
    expect(problem.properties?.status.type).toBe('integer');
    expect(Object.keys(doc.components.schemas.OAuthErrorDto.properties ?? {})).toEqual(expect.arrayContaining(['error', 'error_description']));
  });

  it('documents at least one error for every authenticated or input-taking operation', () => {
    const bare = operations()
      .filter(([path]) => !['/health', '/.well-known/jwks.json', '/.well-known/openid-configuration', '/.well-known/oauth-authorization-server'].includes(path))
      .filter(([, , op]) => !Object.keys(op.responses).some((s) => /^[45]\d\d$/.test(s)))
      .map(([p, m]) => `${m.toUpperCase()} ${p}`);
    expect(bare).toEqual([]);
  });

  it('types integer fields as integer in the response schemas', () => {
    const s = doc.components.schemas;
    expect(s.AgentResponse.properties?.agent_token_max_ttl_sec.type).toBe('integer');
    expect(s.AgentResponse.properties?.agent_metadata_version.type).toBe('integer');
    expect(s.SecuritySettingsResponse.properties?.mfa_grace_period_days.type).toBe('integer');
    expect(s.TokenExchangeResponseDto.properties?.expires_in.type).toBe('integer');
    const numbers = Object.entries(s).flatMap(([name, schema]) =>
      Object.entries(schema.properties ?? {})
        .filter(([, p]) => p.type === 'number')
        .map(([prop]) => `${name}.${prop}`),
    );
    expect(numbers).toEqual([]);
  });
  it('names only declared security schemes; the dashboard cookie and OAuth client Basic are among them', () => {
    const declared = Object.keys(doc.components.securitySchemes ?? {});
    const used = new Set(operations().flatMap(([, , op]) => (op.security ?? []).flatMap((r) => Object.keys(r))));
    for (const name of used) expect(declared).toContain(name);
    expect(doc.components.securitySchemes?.authp_dashboard).toMatchObject({ type: 'apiKey', in: 'cookie', name: 'authp_dashboard' });
    expect(doc.components.securitySchemes?.oauth_client_basic).toMatchObject({ type: 'http', scheme: 'basic' });
    expect(doc.paths['/oauth/token'].post.security).toEqual(expect.arrayContaining([{ oauth_client_basic: [] }]));
    expect(doc.paths['/v1/auth/dashboard/me'].get.security).toEqual([{ authp_dashboard: [] }]);
    // register: X-API-Key always (contract "Tenant resolution"), with a guest bearer to claim
    expect(doc.paths['/v1/auth/register'].post.security).toEqual(expect.arrayContaining([{ api_key: [] }, { api_key: [], bearer: [] }]));
    expect(doc.paths['/v1/auth/register'].post.security).toHaveLength(2);
  });

  it('closes every JSON request schema (unknown properties are refused) and marks bodies that require nothing as optional', () => {
    const bodies = operations().flatMap(([path, m, op]) => {
      const schema = op.requestBody?.content?.['application/json']?.schema;
      return schema ? [{ at: `${m.toUpperCase()} ${path}`, op, schema: resolve(schema) }] : [];
    });
    expect(bodies.length).toBeGreaterThan(20);
    for (const b of bodies) expect([b.at, b.schema.additionalProperties]).toEqual([b.at, false]);
    // nested DTOs too; a free-form field stays open
    const settings = resolve(doc.components.schemas.RegisterAgentRequestDto.properties?.agent_settings);
    expect(settings.additionalProperties).toBe(false);
    expect(doc.components.schemas.AnonymousSigninRequestDto.properties?.public_metadata.additionalProperties).not.toBe(false);
    expect(doc.paths['/v1/auth/anonymous'].post.requestBody?.required).toBe(false);
    expect(doc.paths['/v1/auth/register'].post.requestBody?.required).toBe(true);
    // OAuth forms stay open (RFC 6749: unknown parameters are ignored)
    const form = doc.paths['/oauth/token'].post.requestBody?.content?.['application/x-www-form-urlencoded']?.schema;
    expect(resolve(form).additionalProperties).toBeUndefined();
  });

  it('documents every id path parameter (agents, OAuth clients, API keys, webhooks) as a UUID, once per operation', () => {
    const ids: string[] = [];
    for (const [path, , op] of operations()) {
      for (const name of [...path.matchAll(/\{(agentId|agentClientId|clientId|id)\}/g)].map((m) => m[1])) {
        const params = (op.parameters ?? []).filter((p) => p.in === 'path' && p.name === name);
        ids.push(`${path} ${name} ${params.length} ${params[0]?.schema?.format}`);
      }
    }
    expect(ids.length).toBeGreaterThanOrEqual(17);
    for (const id of ids) expect(id).toMatch(/ 1 uuid$/);
  });

  it('types the agent text fields as strings and documents 413 and 415 where a body is taken', () => {
    const agent = doc.components.schemas.RegisterAgentRequestDto.properties!;
    for (const f of ['description', 'agent_class', 'logo_url']) expect([f, agent[f].type]).toEqual([f, 'string']);
    expect(agent.logo_url.format).toBe('uri');
    const signup = doc.paths['/v1/onboarding/signup'].post.responses;
    expect(Object.keys(signup)).toEqual(expect.arrayContaining(['413', '415']));
  });

  it('documents 413, 415 and 400 request/malformed_json on every POST, PUT, PATCH and DELETE, routes without a body of their own included (the body parsers answer them first); 413 under /oauth too', () => {
    const missing: string[] = [];
    for (const [path, ops] of Object.entries(doc.paths)) {
      for (const m of ['post', 'put', 'patch', 'delete']) {
        const op = ops[m];
        if (!op) continue;
        if (path.startsWith('/oauth/')) {
          if (!op.responses['413']) missing.push(`${m} ${path} 413`);
          continue;
        }
        for (const [status, code] of [['413', 'request/too_large'], ['415', 'request/unsupported_media_type'], ['400', 'request/malformed_json']]) {
          const examples = op.responses[status]?.content?.['application/problem+json']?.examples ?? {};
          if (!Object.values(examples).some((e) => e.value.code === code)) missing.push(`${m} ${path} ${status} ${code}`);
        }
      }
    }
    expect(missing).toEqual([]);
  });

  it('documents 414 request/uri_too_long on every operation with a path parameter (a segment over 2,048 characters), and it is what such a request gets', async () => {
    const missing = operations()
      .filter(([path]) => path.includes('{'))
      .filter(([, , op]) => !Object.values(op.responses['414']?.content?.[PROBLEM_JSON]?.examples ?? {}).some((e) => e.value.code === 'request/uri_too_long'))
      .map(([path, m]) => `${m} ${path}`);
    expect(missing).toEqual([]);
    const res = await t.http().get(`/v1/auth/dashboard/tenants/${'a'.repeat(2049)}/settings/security`).expect(414);
    expect(res.body.code).toBe('request/uri_too_long');
  });

  it('every email a request takes is documented as an email of at most 254 characters', () => {
    const loose: string[] = [];
    let emails = 0;
    for (const [path, m, op] of operations()) {
      const body = (op as { requestBody?: { content?: Record<string, { schema?: Schema }> } }).requestBody?.content?.['application/json']?.schema;
      const email = resolve(body).properties?.email as (Schema & { format?: string; maxLength?: number }) | undefined;
      if (!email) continue;
      emails++;
      if (email.format !== 'email' || email.maxLength !== 254) loose.push(`${m} ${path}`);
    }
    expect(emails).toBeGreaterThanOrEqual(10);
    expect(loose).toEqual([]);
  });

  it('every bearer operation documents the missing-credentials 401 (auth/unauthorized) and the agent API-call limit (429 rate_limit/exceeded)', () => {
    const missing: string[] = [];
    for (const [path, ops] of Object.entries(doc.paths)) {
      for (const [m, op] of Object.entries(ops)) {
        const codes = (status: string) => Object.values(op.responses?.[status]?.content?.['application/problem+json']?.examples ?? {}).map((e) => e.value.code);
        if (!codes('401').includes('auth/invalid_token')) continue;
        if (!codes('401').includes('auth/unauthorized')) missing.push(`${m} ${path} 401 auth/unauthorized`);
        if (!codes('429').includes('rate_limit/exceeded')) missing.push(`${m} ${path} 429 rate_limit/exceeded`);
      }
    }
    expect(missing).toEqual([]);
  });

  it('documents the WWW-Authenticate of every 401 (the challenge of the route\'s credential: Bearer, ApiKey or the dashboard cookie) and of the bearer 403s (insufficient_scope, insufficient_user_authentication)', () => {
    const wrong: string[] = [];
    let bearer403 = 0;
    for (const [path, ops] of Object.entries(doc.paths)) {
      if (path.startsWith('/oauth/')) continue;
      for (const [m, op] of Object.entries(ops)) {
        if (!METHODS.includes(m)) continue;
        const schemes = new Set((op.security ?? []).flatMap((r) => Object.keys(r)));
        const challenge = (status: string) => op.responses[status]?.headers?.['WWW-Authenticate']?.description ?? '';
        const codes = (status: string) => Object.values(op.responses[status]?.content?.['application/problem+json']?.examples ?? {}).map((e) => e.value.code);
        if (op.responses['401']) {
          // register takes X-API-Key, with a guest's bearer to claim: its 401s are the bearer's when one is sent
          const want = path === '/metrics' ? 'Bearer realm="metrics"' : schemes.has('bearer') ? 'Bearer' : schemes.has('api_key') ? 'ApiKey realm="api"' : 'Cookie realm="dashboard"';
          if (!challenge('401').includes(want)) wrong.push(`${m} ${path} 401: want ${want}, documented "${challenge('401')}"`);
        }
        if (!schemes.has('bearer')) continue;
        for (const [code, error] of [['auth/forbidden', 'insufficient_scope'], ['auth/step_up_required', 'insufficient_user_authentication']]) {
          if (!codes('403').includes(code)) continue;
          bearer403++;
          if (!challenge('403').includes(`error="${error}"`)) wrong.push(`${m} ${path} 403 ${code}: want ${error}, documented "${challenge('403')}"`);
        }
      }
    }
    expect(wrong).toEqual([]);
    expect(bearer403).toBeGreaterThanOrEqual(10);
  });

  it('a body on a route without one is refused as documented: 415 when not JSON, 413 when too large', async () => {
    await t.http().post('/v1/auth/logout').set('Content-Type', 'text/plain').send('x').expect(415);
    const big = await t.http().post('/v1/auth/logout').set('Content-Type', 'application/json').send(JSON.stringify({ x: 'a'.repeat(200_000) }));
    expect([big.status, big.body.code]).toEqual([413, 'request/too_large']);
  });
});
