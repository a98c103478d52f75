import { connect, Socket } from 'net';
import { AddressInfo } from 'net';
import { createTestApp, randomIp, STRONG_PASSWORD, TestApp, uniqueEmail } from '../../setup/app';
import { signupTenant } from '../../factories/dashboard.factory';
import { createTenant, TenantFixture } from '../../factories/tenant.factory';
import { holdWrites } from '../../setup/hold-writes';

/**
 * Odd input never gets a 5xx (contract "Conventions"): bodies nested without bound, characters
 * PostgreSQL cannot store, prototype-poisoning keys, form bodies on JSON endpoints, bodies on
 * endpoints that take none, requests Node's HTTP parser refuses. Each answer is problem+json.
 */
describe('input hardening: odd bodies, characters and requests', () => {
  let t: TestApp;
  let tenant: TenantFixture;
  beforeAll(async () => {
    t = await createTestApp({ PUBLIC_BASE_URL: 'http://auth.test.example' });
    tenant = await createTenant(t.db, { anonymous_signins_enabled: true });
  });
  afterAll(() => t.close());

  const nested = (levels: number, leaf = '1') => {
    let s = leaf;
    for (let i = 0; i < levels; i++) s = `{"a":${s}}`;
    return s;
  };
  const rawPost = (path: string, body: string, headers: Record<string, string> = {}) =>
    t.http().post(path).set('Content-Type', 'application/json').set('X-Forwarded-For', randomIp()).set(headers).send(body);
  const expectInvalid = (res: { status: number; body: { code: string }; headers: Record<string, string> }, status = 400, code = 'request/invalid') => {
    expect(res.status).toBe(status);
    expect(res.body.code).toBe(code);
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(res.headers['x-request-id']).toBeTruthy();
  };

  it('a body nested 5000 levels deep is 400, with or without credentials (it used to overflow the stack)', async () => {
    const deep = nested(5000);
    expectInvalid(await rawPost('/v1/onboarding/signup', `{"email":"a@b.co","x":${deep}}`));
    expectInvalid(await rawPost('/v1/auth/dashboard/login', `{"email":"a@b.co","password":"x","x":${deep}}`));
    expectInvalid(await rawPost('/v1/auth/login', `{"email":"a@b.co","password":"x","x":${deep}}`, { 'X-API-Key': tenant.apiKey }));
    expectInvalid(await rawPost('/v1/auth/refresh', `{"refresh_token":${'['.repeat(5000)}${']'.repeat(5000)}}`, { 'X-API-Key': tenant.apiKey }));
    const meta = await rawPost('/v1/auth/anonymous', `{"public_metadata":${nested(40)}}`, { 'X-API-Key': tenant.apiKey });
    expectInvalid(meta);
    expect(meta.body.errors[0].message).toMatch(/nested deeper than 32 levels/);
    // a reasonably nested public_metadata is fine
    await rawPost('/v1/auth/anonymous', `{"public_metadata":${nested(8)}}`, { 'X-API-Key': tenant.apiKey }).expect(201);
  });

  it('U+0000 and unpaired surrogates in any string, value or key, and numbers out of range, are 400 naming the field; nothing is stored', async () => {
    const before = await t.db.query(`SELECT count(*)::int AS n FROM tenants`);
    const nul = await rawPost('/v1/onboarding/signup', JSON.stringify({ email: uniqueEmail(), password: STRONG_PASSWORD, tenant_name: 'ab\u0000cd', consent_terms: true, consent_privacy: true }));
    expectInvalid(nul);
    expect(nul.body.errors).toEqual([{ field: 'tenant_name', message: expect.stringMatching(/not allowed/) }]);
    expect(await t.db.query(`SELECT count(*)::int AS n FROM tenants`)).toEqual(before);
    for (const body of ['{"public_metadata":{"note":"a\\u0000b"}}', '{"public_metadata":{"note":"\\ud800"}}', '{"public_metadata":{"a\\u0000":1}}', '{"public_metadata":{"x":["ok","\\udc00"]}}']) {
      const r = await rawPost('/v1/auth/anonymous', body, { 'X-API-Key': tenant.apiKey });
      expectInvalid(r);
      expect(r.body.errors[0].field).toMatch(/^public_metadata/);
    }
    // an array item is named by the dotted path validation errors use (public_metadata.x.1)
    const item = await rawPost('/v1/auth/anonymous', '{"public_metadata":{"x":["ok","a\\u0000"]}}', { 'X-API-Key': tenant.apiKey });
    expect(item.body.errors).toEqual([{ field: 'public_metadata.x.1', message: 'public_metadata.x.1 contains a character that is not allowed (U+0000 or an unpaired surrogate)' }]);
    // a number beyond the double range would be stored as null: refused, naming it
    for (const n of ['1e400', '-1e400']) {
      const r = await rawPost('/v1/auth/anonymous', `{"public_metadata":{"score":${n}}}`, { 'X-API-Key': tenant.apiKey });
      expectInvalid(r);
      expect(r.body.errors).toEqual([{ field: 'public_metadata.score', message: 'public_metadata.score is a number out of range' }]);
    }
    // every such fault of the body is named, one entry each
    const several = await rawPost('/v1/auth/anonymous', '{"public_metadata":{"a":"\\u0000","b":"\\ud800","c":1e400}}', { 'X-API-Key': tenant.apiKey });
    expectInvalid(several);
    expect(several.body.errors.map((e: { field: string }) => e.field).sort()).toEqual(['public_metadata.a', 'public_metadata.b', 'public_metadata.c']);
    // at most 20 entries, and one for an object however many of its names are bad
    const many = await rawPost('/v1/auth/anonymous', JSON.stringify({ public_metadata: Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`k${i}`, 'a\u0000'])) }), { 'X-API-Key': tenant.apiKey });
    expect(many.body.errors).toHaveLength(20);
    const names = await rawPost('/v1/auth/anonymous', JSON.stringify({ public_metadata: Object.fromEntries(Array.from({ length: 5 }, (_, i) => [`k${i}\u0000`, 1])) }), { 'X-API-Key': tenant.apiKey });
    expect(names.body.errors).toEqual([{ field: 'public_metadata', message: expect.stringMatching(/property name/) }]);
    // a paired surrogate (an emoji) is an ordinary character
    const ok = await rawPost('/v1/auth/anonymous', '{"public_metadata":{"mood":"\\ud83d\\ude00"}}', { 'X-API-Key': tenant.apiKey }).expect(201);
    const me = await t.http().get('/v1/auth/me').set('Authorization', `Bearer ${ok.body.access_token}`).expect(200);
    expect(me.body.public_metadata).toEqual({ mood: '😀' });
  });

  it('a body with a Content-Encoding (gzip, ...) is 415, never read as if it were plain; identity is fine', async () => {
    const gz = await rawPost('/v1/auth/anonymous', '{}', { 'X-API-Key': tenant.apiKey, 'Content-Encoding': 'gzip' });
    expect([gz.status, gz.body.code]).toEqual([415, 'request/unsupported_media_type']);
    const oauth = await t.http().post('/oauth/introspect').type('form').set('Content-Encoding', 'br').set('X-API-Key', tenant.apiKey).send({ token: 'x' });
    expect([oauth.status, oauth.body.error]).toEqual([400, 'invalid_request']);
    await rawPost('/v1/auth/anonymous', '{}', { 'X-API-Key': tenant.apiKey, 'Content-Encoding': 'identity' }).expect(201);
    // a request without a body is not asked (a probe that sends the header anyway)
    await t.http().get('/health').set('Content-Encoding', 'gzip').expect(200);
  });

  it('a body of thousands of unknown names is refused cheaply and briefly: at most 50 errors[], over 1000 names at any depth refused outright', async () => {
    const wide: Record<string, unknown> = { email: 'a@example.com', password: 'x'.repeat(12) };
    for (let i = 0; i < 900; i++) wide[`k${i}`] = 1;
    const res = await rawPost('/v1/auth/dashboard/login', JSON.stringify(wide));
    expectInvalid(res);
    expect(res.body.errors).toHaveLength(50);
    expect(res.body.errors[0]).toEqual({ field: 'k0', message: 'property k0 is not allowed' });
    expect(res.body.detail).toBe('900 fields are invalid; the first 50 are listed');
    // names past the limit, at any depth (inside a nested object too): refused before any validation
    const deep = { public_metadata: Object.fromEntries(Array.from({ length: 1001 }, (_, i) => [`m${i}`, 1])) };
    const big = await rawPost('/v1/auth/anonymous', JSON.stringify(deep), { 'X-API-Key': tenant.apiKey });
    expectInvalid(big);
    expect(big.body.errors).toEqual([{ field: 'body', message: 'the body has more than 1000 properties' }]);
    // array items count as names do: 20,000 to 50,000 of them (within the 100 KB limit) cost the validation up to half a second
    for (const items of ['1', '{}', '"a"']) {
      const arr = await rawPost('/v1/auth/dashboard/password/forgot', `{"email":[${Array(items === '1' ? 50_000 : 20_000).fill(items).join(',')}]}`);
      expectInvalid(arr);
      expect(arr.body.errors).toEqual([{ field: 'body', message: 'the body has more than 2048 array items' }]);
    }
    // public_metadata may hold any array its 4096 bytes can: 2,000 one-digit items pass
    const meta = await rawPost('/v1/auth/anonymous', JSON.stringify({ public_metadata: { ids: Array(2000).fill(0) } }), { 'X-API-Key': tenant.apiKey });
    expect(meta.status).toBe(201);
    // a few unknown names are still each named beside the other faults
    const few = await rawPost('/v1/auth/dashboard/login', JSON.stringify({ email: 'a@example.com', extra: 1 }));
    expect(few.body.errors.map((e: { field: string }) => e.field).sort()).toEqual(['extra', 'password']);
  });

  it('JSON bodies are UTF-8: another declared charset is 415, bytes that are not UTF-8 are 400 (never read with U+FFFD in their place)', async () => {
    const body = (password: string | Buffer) => Buffer.concat([Buffer.from(`{"email":"${uniqueEmail('utf8')}","password":"correct horse `), Buffer.from(password), Buffer.from('","consent":true}')]);
    const rawRegister = (type: string, payload: Buffer) =>
      sendRaw(Buffer.concat([Buffer.from(`POST /v1/auth/register HTTP/1.1\r\nHost: x\r\nX-API-Key: ${tenant.apiKey}\r\nX-Forwarded-For: ${randomIp()}\r\nContent-Type: ${type}\r\nContent-Length: ${payload.length}\r\nConnection: close\r\n\r\n`), payload]));
    const latin1 = await rawRegister('application/json; charset=iso-8859-1', body(Buffer.from([0xe9, 0xe9])));
    expect(latin1).toMatch(/^HTTP\/1\.1 415 /);
    const invalid = await rawRegister('application/json', body(Buffer.from([0xe9, 0xe9])));
    expect(invalid).toMatch(/^HTTP\/1\.1 400 /);
    expect(invalid).toContain('"code":"request/malformed_json"');
    for (const type of ['application/json; charset=utf-8', 'application/json;charset="UTF-8"', 'application/json; charset=utf8']) {
      expect(await rawRegister(type, body('\u00e9\u00e9'))).toMatch(/^HTTP\/1\.1 201 /);
    }
  });

  it('a transfer coding other than chunked and a second Authorization header are refused, never read past', async () => {
    const te = await sendRaw('POST /v1/auth/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: gzip, chunked\r\nConnection: close\r\n\r\n2\r\n{}\r\n0\r\n\r\n');
    expect(te.match(/HTTP\/1\.1 \d+/g)).toEqual(['HTTP/1.1 415']);
    // a last coding other than chunked: the HTTP parser's one refusal, never two answers to one request
    for (const coding of ['xchunked', 'gzip', 'identity']) {
      const raw = await sendRaw(`POST /v1/auth/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: ${coding}\r\nConnection: close\r\n\r\n`);
      expect([coding, raw.match(/HTTP\/1\.1 \d+/g)]).toEqual([coding, ['HTTP/1.1 400']]);
    }
    const session = await t.http().post('/v1/auth/anonymous').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', randomIp()).send({}).expect(201);
    const twice = await sendRaw(`GET /v1/auth/me HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${session.body.access_token}\r\nAuthorization: Bearer forged\r\nConnection: close\r\n\r\n`);
    expect(twice).toMatch(/^HTTP\/1\.1 400 /);
    expect(twice).toContain('Authorization must be sent once');
    const oauth = await sendRaw('POST /oauth/introspect HTTP/1.1\r\nHost: x\r\nAuthorization: Basic YTpi\r\nAuthorization: Basic Yzpk\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 7\r\nConnection: close\r\n\r\ntoken=x');
    expect(oauth).toMatch(/^HTTP\/1\.1 400 /);
    expect(oauth).toContain('"error":"invalid_request"');
  });

  it('an unmet Expect (417) and a request without Host are answered in the one envelope with a request id, not by Node bare', async () => {
    const expectation = await sendRaw('POST /v1/auth/login HTTP/1.1\r\nHost: x\r\nExpect: foo\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}');
    expect(expectation).toMatch(/^HTTP\/1\.1 417 /);
    expect(expectation).toMatch(/content-type: application\/problem\+json/i);
    expect(expectation).toMatch(/x-request-id: [0-9a-f-]{36}/i);
    expect(JSON.parse(expectation.slice(expectation.indexOf('\r\n\r\n') + 4))).toMatchObject({ status: 417, code: 'request/expectation_failed' });
    const hostless = await sendRaw('GET /v1/auth/me HTTP/1.1\r\nConnection: close\r\n\r\n');
    expect(hostless).toMatch(/^HTTP\/1\.1 401 /);
    expect(hostless).toMatch(/content-type: application\/problem\+json/i);
    expect(hostless).toMatch(/x-request-id: /i);
  });

  it('a path the /docs static files refuse (.., an encoded .., a NUL byte) is a problem+json 4xx, never a 500', async () => {
    for (const [path, status] of [['/docs/..', 404], ['/docs/%2e%2e', 404], ['/docs/x%00', 400], ['/docs/..?access_token=x', 404]] as const) {
      const raw = await sendRaw(`GET ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
      expect([path, raw.match(/^HTTP\/1\.1 (\d+)/)?.[1]]).toEqual([path, String(status)]);
      expect(raw).toMatch(/content-type: application\/problem\+json/i);
    }
  });

  it('a percent-encoded /oauth path is an OAuth request as the router reads it (form body, RFC 6749 envelope)', async () => {
    const res = await t.http().post('/%6fauth/introspect').type('form').set('X-API-Key', tenant.apiKey).send({ token: 'x' }).expect(200);
    expect(res.body).toEqual({ active: false });
  });

  it('an absolute-form request target (RFC 9112 section 3.2.2) is read as its path: /oauth gets its form body and envelope, /.well-known its CORS', async () => {
    const body = 'token=x';
    const ok = await sendRaw(
      `POST http://auth.test.example/oauth/introspect HTTP/1.1\r\nHost: auth.test.example\r\nX-API-Key: ${tenant.apiKey}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
    );
    expect(ok).toMatch(/^HTTP\/1\.1 200 /);
    expect(JSON.parse(ok.slice(ok.indexOf('\r\n\r\n') + 4))).toEqual({ active: false });
    const denied = await sendRaw(`POST HTTP://AUTH.test.example:80/oauth/token HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 7\r\nConnection: close\r\n\r\nfoo=bar`);
    expect(denied).toMatch(/^HTTP\/1\.1 40[01] /);
    expect(JSON.parse(denied.slice(denied.indexOf('\r\n\r\n') + 4))).toHaveProperty('error');
    const missing = await sendRaw('GET http://auth.test.example/.well-known/nothing HTTP/1.1\r\nHost: x\r\nOrigin: https://rp.example\r\nConnection: close\r\n\r\n');
    expect(missing).toMatch(/^HTTP\/1\.1 404 /);
    expect(missing).toMatch(/access-control-allow-origin: \*/i);
  });

  it('a second Content-Type or Host header is refused (a proxy could read the other one); CONNECT is 405 in the envelope, never a dropped connection', async () => {
    const twice = await sendRaw('POST /v1/auth/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Type: text/plain\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}');
    expect(twice).toMatch(/^HTTP\/1\.1 400 /);
    expect(twice).toContain('Content-Type must be sent once');
    // two Host headers: 400 (RFC 9112 section 3.2), on any route (review: /health answered 200)
    for (const path of ['/health', '/v1/auth/me']) {
      const hosts = await sendRaw(`GET ${path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nHost: other.example\r\n\r\n`);
      expect(hosts).toMatch(/^HTTP\/1\.1 400 /);
      expect(hosts).toMatch(/content-type: application\/problem\+json/i);
      expect(hosts).toContain('Host must be sent once');
    }
    const tunnel = await sendRaw('CONNECT 127.0.0.1:443 HTTP/1.1\r\nHost: 127.0.0.1:443\r\n\r\n');
    expect(tunnel).toMatch(/^HTTP\/1\.1 405 /);
    expect(tunnel).toMatch(/content-type: application\/problem\+json/i);
    expect(tunnel).toMatch(/^allow: /im);
    expect(JSON.parse(tunnel.slice(tunnel.indexOf('\r\n\r\n') + 4))).toMatchObject({ status: 405, code: 'request/method_not_allowed' });
  });

  it('answers made before routing (parser refusals, 431, 417, a malformed URL) carry the security headers and Cache-Control: no-store as every other', async () => {
    const answers = [
      await sendRaw('POST /v1/auth/login HTTP/1.1\r\nHost: x\r\nX-API-Key: a\x01b\r\nContent-Length: 2\r\n\r\n{}'),
      await sendRaw(`GET /v1/auth/me HTTP/1.1\r\nHost: x\r\nX-Big: ${'A'.repeat(20_000)}\r\n\r\n`),
      await sendRaw('POST /v1/auth/login HTTP/1.1\r\nHost: x\r\nExpect: foo\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}'),
      await sendRaw('GET /health/%ff HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'),
    ];
    for (const raw of answers) {
      const head = raw.slice(0, raw.indexOf('\r\n\r\n'));
      expect([head.split('\r\n')[0], /x-content-type-options: nosniff/i.test(head), /cache-control: no-store/i.test(head), /content-security-policy: /i.test(head)]).toEqual([
        head.split('\r\n')[0],
        true,
        true,
        true,
      ]);
    }
    // each refusal with its own code (the catalog's status for it)
    const codes = answers.slice(0, 3).map((raw) => {
      const body = JSON.parse(raw.slice(raw.indexOf('\r\n\r\n') + 4)) as { status: number; code: string };
      return [body.status, body.code];
    });
    expect(codes).toEqual([[400, 'request/invalid'], [431, 'request/headers_too_large'], [417, 'request/expectation_failed']]);
  });

  it('a query parameter named __proto__, constructor or prototype is 400 naming it (the validation pipe would delete it unsaid)', async () => {
    const d = await signupTenant(t);
    for (const name of ['constructor', 'prototype', '__proto__']) {
      const r = await t.http().get(`/v1/auth/dashboard/tenants/${d.slug}/api-keys?${name}=1`).set('Cookie', d.cookie);
      expectInvalid(r);
      expect(r.body.errors[0].field).toBe(name);
    }
  });

  it('U+0000 in a path or query value the database sees is 400, not 500', async () => {
    const d = await signupTenant(t);
    const r = await t.http().get(`/v1/auth/dashboard/tenants/a%00b/api-keys`).set('Cookie', d.cookie);
    expect(r.status).toBeLessThan(500);
    expect(r.headers['content-type']).toMatch(/^application\/problem\+json/);
  });

  it('__proto__ and constructor.prototype keys are 400 request/invalid (valid JSON, refused properties)', async () => {
    for (const body of ['{"public_metadata":{"__proto__":{"x":1}}}', '{"public_metadata":{"constructor":{"prototype":{"x":1}}}}']) {
      const r = await rawPost('/v1/auth/anonymous', body, { 'X-API-Key': tenant.apiKey });
      expectInvalid(r);
      expect(r.body.errors[0].message).toMatch(/__proto__ or constructor.prototype/);
    }
    expectInvalid(await rawPost('/v1/auth/anonymous', '{"public_metadata":', { 'X-API-Key': tenant.apiKey }), 400, 'request/malformed_json');
  });

  it('form bodies are refused (415) outside /oauth/*: a cross-site HTML form cannot sign in to the dashboard', async () => {
    const d = await signupTenant(t);
    const form = await t
      .http()
      .post('/v1/auth/dashboard/login')
      .set('Origin', 'https://attacker.example')
      .set('Content-Type', 'application/x-www-form-urlencoded')
      .send(`email=${encodeURIComponent(d.email)}&password=${encodeURIComponent(d.password)}`);
    expectInvalid(form, 415, 'request/unsupported_media_type');
    expect(form.headers['set-cookie']).toBeUndefined();
    const text = await t.http().post('/v1/auth/login').set('X-API-Key', tenant.apiKey).set('Content-Type', 'text/plain').send('hello');
    expectInvalid(text, 415, 'request/unsupported_media_type');
    // the same credentials as JSON sign in
    await t.http().post('/v1/auth/dashboard/login').set('X-Forwarded-For', randomIp()).send({ email: d.email, password: d.password }).expect(200);
  });

  it('endpoints that take no body refuse one (400), and accept none, an empty body or {}', async () => {
    const reg = async () =>
      (await t.http().post('/v1/auth/register').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', randomIp()).send({ email: uniqueEmail(), password: STRONG_PASSWORD, consent: true }).expect(201)).body;
    const a = await reg();
    for (const [body, message] of [
      ['{"everywhere":true}', 'this endpoint takes no request body'],
      ['[1,2]', 'the body must be a JSON object'],
      ['"x"', 'the body must be a JSON object'],
    ]) {
      const r = await rawPost('/v1/auth/logout', body, { Authorization: `Bearer ${a.access_token}` });
      expectInvalid(r);
      expect(r.body.errors).toEqual([{ field: 'body', message }]);
    }
    // nothing happened: the session is live
    await t.http().get('/v1/auth/me').set('Authorization', `Bearer ${a.access_token}`).expect(200);
    await rawPost('/v1/auth/logout', '{}', { Authorization: `Bearer ${a.access_token}` }).expect(204);
    const b = await reg();
    await t.http().post('/v1/auth/logout').set('Authorization', `Bearer ${b.access_token}`).expect(204);
    // Content-Type: application/json with an empty body (many HTTP clients send that) is no body
    const c = await reg();
    await rawPost('/v1/auth/logout', '', { Authorization: `Bearer ${c.access_token}` }).expect(204);
    await t.http().get('/v1/auth/me').set('Authorization', `Bearer ${c.access_token}`).expect(401);
    // ...and where a body is required, its fields are missing (400 naming them), not malformed JSON
    const empty = await rawPost('/v1/auth/login', ' ', { 'X-API-Key': tenant.apiKey });
    expectInvalid(empty);
    expect(empty.body.errors.map((e: { field: string }) => e.field).sort()).toEqual(['email', 'password']);
    const d = await signupTenant(t);
    expectInvalid(await t.http().post('/v1/auth/dashboard/logout').set('Cookie', d.cookie).set('X-CSRF-Token', d.csrf).send({ x: 1 }));
    await t.http().get('/v1/auth/dashboard/me').set('Cookie', d.cookie).expect(200);
  });

  it('a JSON body that is not an object (null, an array, a bare value) is 400 naming the body, even where every field is optional', async () => {
    const guests = async () => (await t.db.query(`SELECT 1 FROM users WHERE tenant_id = $1 AND is_anonymous`, [tenant.id])).length;
    const before = await guests();
    for (const body of ['null', '[]', '"x"', '5', 'true']) {
      const r = await rawPost('/v1/auth/anonymous', body, { 'X-API-Key': tenant.apiKey });
      expectInvalid(r);
      expect(r.body.errors).toEqual([{ field: 'body', message: 'the body must be a JSON object' }]);
    }
    const d = await signupTenant(t);
    const r = await t.http().patch(`/v1/auth/dashboard/tenants/${d.slug}/settings/anonymous`).set('Cookie', d.cookie).set('X-CSRF-Token', d.csrf).set('Content-Type', 'application/json').send('null');
    expectInvalid(r);
    // no guest was created by any of them, and {} still works
    expect(await guests()).toBe(before);
    await rawPost('/v1/auth/anonymous', '{}', { 'X-API-Key': tenant.apiKey }).expect(201);
  });

  it('errors[] has one entry per offending field, saying what is wrong first', async () => {
    const r = await rawPost('/v1/auth/login', JSON.stringify({ password: 'x', extra: 1 }), { 'X-API-Key': tenant.apiKey });
    expectInvalid(r);
    const byField = new Map<string, string[]>();
    for (const e of r.body.errors as { field: string; message: string }[]) byField.set(e.field, [...(byField.get(e.field) ?? []), e.message]);
    expect(byField.get('email')).toEqual(['email is required']);
    expect(byField.get('extra')).toEqual(['property extra is not allowed']);
    for (const msgs of byField.values()) expect(msgs).toHaveLength(1);
    const wrongType = await rawPost('/v1/auth/login', JSON.stringify({ email: 42, password: null }), { 'X-API-Key': tenant.apiKey });
    expect(wrongType.body.errors).toEqual(
      expect.arrayContaining([{ field: 'email', message: expect.not.stringMatching(/shorter|longer/) }, { field: 'password', message: 'password must not be null' }]),
    );
  });

  it('null is not "absent": an optional field that cannot be null refuses it (400 naming the field)', async () => {
    const r = await rawPost('/v1/auth/anonymous', '{"public_metadata":null}', { 'X-API-Key': tenant.apiKey });
    expectInvalid(r);
    expect(r.body.errors).toEqual([{ field: 'public_metadata', message: 'public_metadata must not be null' }]);
    const d = await signupTenant(t);
    const patch = await t
      .http()
      .patch(`/v1/auth/dashboard/tenants/${d.slug}/settings/anonymous`)
      .set('Cookie', d.cookie)
      .set('X-CSRF-Token', d.csrf)
      .send({ anonymous_user_ttl_days: null, default_user_role: null });
    expectInvalid(patch);
    expect(patch.body.errors.map((e: { field: string }) => e.field).sort()).toEqual(['anonymous_user_ttl_days', 'default_user_role']);
    const reg = await rawPost('/v1/auth/register', JSON.stringify({ email: uniqueEmail(), password: STRONG_PASSWORD, consent: true, date_of_birth: null }), { 'X-API-Key': tenant.apiKey });
    expectInvalid(reg);
  });

  it('tenant_name is trimmed before its 2-50 length check (spec 2.1)', async () => {
    const signup = (name: string) =>
      rawPost('/v1/onboarding/signup', JSON.stringify({ email: uniqueEmail('owner'), password: STRONG_PASSWORD, tenant_name: name, consent_terms: true, consent_privacy: true }));
    for (const name of ['    ', ' x ', '\n\t\n']) {
      const r = await signup(name);
      expectInvalid(r);
      expect(r.body.errors).toEqual([{ field: 'tenant_name', message: expect.any(String) }]);
    }
    const ok = await signup('  Acme Trimmed  ').expect(201);
    expect(ok.body.tenant.name).toBe('Acme Trimmed');
  });

  it('lengths are counted in code points, as the OpenAPI minLength/maxLength: a variation selector counts, an emoji counts once', async () => {
    const signup = (name: string) =>
      rawPost('/v1/onboarding/signup', JSON.stringify({ email: uniqueEmail('owner'), password: STRONG_PASSWORD, tenant_name: name, consent_terms: true, consent_privacy: true }));
    // "❤️" is two code points (U+2764 U+FE0F): 50 of them are 100, over the 50 of spec 2.1
    const over = await signup('\u2764\uFE0F'.repeat(50));
    expectInvalid(over);
    expect(over.body.errors).toEqual([{ field: 'tenant_name', message: 'tenant_name must be shorter than or equal to 50 characters' }]);
    await signup('\u2764\uFE0F'.repeat(25)).expect(201);
    // "a" and a variation selector: two code points, the minimum
    await signup('a\uFE0F').expect(201);
    // astral characters count once each: 50 of them are 50
    await signup('\u{1F600}'.repeat(50)).expect(201);
    expectInvalid(await signup('\u{1F600}'.repeat(51)));
  });

  it('X-Service-Docs points at this service (PUBLIC_BASE_URL) unless RATE_LIMIT_DOCS_URL says otherwise', async () => {
    const ip = randomIp();
    let last;
    for (let i = 0; i < 6; i++) last = await t.http().post('/v1/auth/register').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', ip).send({});
    expect(last!.status).toBe(429);
    expect(last!.headers['x-service-docs']).toBe('http://auth.test.example/docs#rate-limits');
  });

  it('per-address limits count an IPv6 client by its /64 and an IPv4 client in any spelling', async () => {
    const register = (ip: string) => t.http().post('/v1/auth/register').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', ip).send({});
    const group = () => ((Math.random() * 0xffff) | 0).toString(16);
    const prefix = `2001:db8:${group()}:${group()}`;
    for (let i = 1; i <= 5; i++) expect((await register(`${prefix}:${i.toString(16)}::${i}`)).status).toBe(400);
    const sixth = await register(`${prefix}:ffff:ffff:ffff:fffe`);
    expect(sixth.status).toBe(429);
    expect(sixth.headers['retry-after']).toBeTruthy();
    const v4 = randomIp();
    for (let i = 0; i < 5; i++) expect((await register(i % 2 ? `::ffff:${v4}` : v4)).status).toBe(400);
    expect((await register(`::FFFF:${v4}`)).status).toBe(429);
  });

  it('answers carrying tokens or personal data are Cache-Control: no-store; the public key documents stay cacheable', async () => {
    const reg = await t.http().post('/v1/auth/register').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', randomIp()).send({ email: uniqueEmail(), password: STRONG_PASSWORD, consent: true }).expect(201);
    expect(reg.headers['cache-control']).toBe('no-store');
    const refreshed = await t.http().post('/v1/auth/refresh').set('X-API-Key', tenant.apiKey).send({ refresh_token: reg.body.refresh_token }).expect(200);
    expect(refreshed.headers['cache-control']).toBe('no-store');
    expect((await t.http().get('/v1/auth/me').set('Authorization', `Bearer ${refreshed.body.access_token}`).expect(200)).headers['cache-control']).toBe('no-store');
    expect((await t.http().get('/.well-known/jwks.json').expect(200)).headers['cache-control']).toBe('public, max-age=300');
  });

  it('a path segment over 100 characters reaches the route (problem+json), not a bare 414', async () => {
    const d = await signupTenant(t);
    const r = await t.http().get(`/v1/auth/dashboard/tenants/${'a'.repeat(300)}/api-keys`).set('Cookie', d.cookie);
    expect(r.status).toBe(404);
    expect(r.headers['content-type']).toMatch(/^application\/problem\+json/);
  });

  it('a malformed percent-encoding or a path segment over 2,048 characters is answered in the one envelope', async () => {
    for (const path of ['/health/%ff', '/v1/auth/dashboard/tenants/%C0%AE/api-keys']) {
      const r = await t.http().get(path);
      expectInvalid(r);
    }
    const long = await t.http().get(`/v1/auth/dashboard/tenants/${'a'.repeat(9000)}/api-keys`);
    expectInvalid(long, 414, 'request/uri_too_long');
  });

  const sendRaw = async (request: string | Buffer): Promise<string> => {
    const server = t.app.getHttpServer();
    if (!server.listening) await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
    const { port } = server.address() as AddressInfo;
    return new Promise<string>((resolve, reject) => {
      const s = connect(port, '127.0.0.1', () => s.write(request));
      let data = '';
      s.on('data', (c) => (data += c.toString()));
      s.on('end', () => resolve(data));
      s.on('error', reject);
    });
  };

  it('a request the HTTP parser refuses (control character in a header) gets problem+json with X-Request-Id', async () => {
    const raw = await sendRaw('POST /v1/auth/login HTTP/1.1\r\nHost: x\r\nX-API-Key: a\x01b\r\nContent-Length: 2\r\n\r\n{}');
    expect(raw).toMatch(/^HTTP\/1\.1 400 /);
    expect(raw).toMatch(/content-type: application\/problem\+json/i);
    expect(raw).toMatch(/x-request-id: [0-9a-f-]{36}/i);
    expect(JSON.parse(raw.slice(raw.indexOf('\r\n\r\n') + 4))).toMatchObject({ status: 400, code: 'request/invalid' });
  });

  it('such a refusal behind a pipelined request still being answered never comes before that answer (RFC 9112 section 9.3.2), never read as its answer', async () => {
    const email = uniqueEmail('pipelined');
    const body = JSON.stringify({ email, password: STRONG_PASSWORD, consent: true });
    const first = `POST /v1/auth/register HTTP/1.1\r\nHost: x\r\nX-API-Key: ${tenant.apiKey}\r\nX-Forwarded-For: ${randomIp()}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
    const raw = await sendRaw(`${first}GET /health HTTP/1.1\r\nHost: x\r\nX-Bad: a\x01b\r\n\r\n`);
    const statusLines = raw.split('\r\n').filter((l) => /^HTTP\/1\.1 \d{3} /.test(l));
    // the register's own answer first; then the refusal, or the connection closed without one
    expect(statusLines[0]).toBe('HTTP/1.1 201 Created');
    expect(statusLines.slice(1).every((l) => l === 'HTTP/1.1 400 Bad Request')).toBe(true);
    expect(statusLines.length).toBeLessThanOrEqual(2);
    expect(await t.db.query(`SELECT 1 FROM users WHERE email = $1`, [email])).toHaveLength(1);
  });

  it('under /oauth such a refusal (and headers over the limit, 431) is in the RFC 6749 envelope with Cache-Control: no-store', async () => {
    for (const [request, status, description] of [
      ['POST /oauth/token HTTP/1.1\r\nHost: x\r\nBad Header\r\nContent-Length: 2\r\n\r\nab', 400, 'The HTTP request could not be parsed'],
      [`POST /oauth/token HTTP/1.1\r\nHost: x\r\nAuthorization: Basic ${'A'.repeat(20_000)}\r\nContent-Length: 2\r\n\r\nab`, 431, 'The request headers are too large'],
    ] as const) {
      const raw = await sendRaw(request);
      expect(raw.split('\r\n')[0]).toMatch(new RegExp(`^HTTP/1\\.1 ${status} `));
      expect(raw).toMatch(/content-type: application\/json/i);
      expect(raw).toMatch(/cache-control: no-store/i);
      expect(JSON.parse(raw.slice(raw.indexOf('\r\n\r\n') + 4))).toEqual({ error: 'invalid_request', error_description: description });
    }
  });

  it('a query string whose percent-encoded bytes are not UTF-8 is 400, never read with U+FFFD (as bodies and paths); valid UTF-8 and a lone % are fine', async () => {
    const d = await signupTenant(t);
    for (const q of ['email=a%FFb', 'email=%C3', 'cursor=%ED%A0%80']) {
      const r = await t.http().get(`/v1/auth/dashboard/tenants/${d.slug}/users?${q}`).set('Cookie', d.cookie);
      expectInvalid(r);
      expect(r.body.detail).toBe('The query string is not valid UTF-8');
    }
    await t.http().get(`/v1/auth/dashboard/tenants/${d.slug}/users?email=m%C3%BCller%40example.com`).set('Cookie', d.cookie).expect(200);
    const oauth = await t.http().get('/oauth/introspect?x=%FF');
    expect(oauth.body).toMatchObject({ error: 'invalid_request' });
  });

  it('a query value with U+0000 is 400 (request/invalid naming it; invalid_request under /oauth)', async () => {
    const r = await t.http().get('/v1/auth/me?x=a%00b').set('X-API-Key', tenant.apiKey);
    expectInvalid(r);
    expect(r.body.errors[0]).toMatchObject({ field: 'x' });
    const o = await t.http().post('/oauth/introspect?x=%00').type('form').set('X-API-Key', tenant.apiKey).send({ token: 'nope' }).expect(400);
    expect(o.body.error).toBe('invalid_request');
  });

  it('a refusal waiting behind a pipelined answer is owed once: the bytes that follow it add no listener per chunk (Node reports each as a client error)', async () => {
    const server = t.app.getHttpServer();
    if (!server.listening) await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
    const { port } = server.address() as AddressInfo;
    const serverSockets: Socket[] = [];
    const onConn = (s: Socket) => serverSockets.push(s);
    server.on('connection', onConn);
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(w.name);
    process.on('warning', onWarning);
    const email = uniqueEmail('pipelined');
    // the register's insert of the user sleeps 2 s inside its statement: the first request is owed meanwhile
    const release = await holdWrites(t.db, 'users', 'INSERT', `NEW.email_normalized = '${email}'`, 2);
    try {
      const body = JSON.stringify({ email, password: STRONG_PASSWORD, consent: true });
      const first = `POST /v1/auth/register HTTP/1.1\r\nHost: x\r\nX-API-Key: ${tenant.apiKey}\r\nX-Forwarded-For: ${randomIp()}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
      let raw = '';
      const c = connect(port, '127.0.0.1');
      const ended = new Promise<void>((resolve) => c.on('close', () => resolve()));
      c.on('data', (d) => (raw += d.toString()));
      c.on('error', () => undefined);
      await new Promise<void>((r) => c.once('connect', () => r()));
      c.write(`${first}GET /health HTTP/1.1\r\nHost: x\r\nX-Bad: a\x01b\r\n\r\n`);
      await release.reached();
      // 200 small chunks after the refused request, each its own segment
      for (let i = 0; i < 200; i++) {
        c.write('x');
        await new Promise((r) => setTimeout(r, 2));
      }
      await new Promise((r) => setTimeout(r, 100));
      const sock = serverSockets[serverSockets.length - 1] as Socket & { _httpMessage?: NodeJS.EventEmitter | null };
      const finishListeners = sock._httpMessage?.listenerCount('finish') ?? -1;
      const closeListeners = sock._httpMessage?.listenerCount('close') ?? -1;
      await ended;
      // both answers, in order
      expect(raw.match(/HTTP\/1\.1 \d{3}/g)).toEqual(['HTTP/1.1 201', 'HTTP/1.1 400']);
      // Node's own plus one deferral: a handful, not one pair per chunk the client sent
      expect(finishListeners).toBeLessThan(6);
      expect(closeListeners).toBeLessThan(6);
      expect(warnings).not.toContain('MaxListenersExceededWarning');
    } finally {
      process.off('warning', onWarning);
      server.off('connection', onConn);
      await release();
    }
  });

  it('CORS: an allowed origin may use every method the API answers, with credentials; another origin gets no CORS headers, except on the public /.well-known documents (any origin, no credentials)', async () => {
    const cors = await createTestApp({ CORS_ORIGINS: 'https://app.example, https://admin.example' });
    try {
      for (const method of ['GET', 'POST', 'PUT', 'PATCH', 'DELETE']) {
        const pre = await cors
          .http()
          .options('/v1/auth/dashboard/tenants/acme/settings/security')
          .set('Origin', 'https://admin.example')
          .set('Access-Control-Request-Method', method)
          .set('Access-Control-Request-Headers', 'content-type,x-csrf-token');
        expect(pre.status).toBe(204);
        expect(pre.headers['access-control-allow-origin']).toBe('https://admin.example');
        expect(pre.headers['access-control-allow-credentials']).toBe('true');
        expect(pre.headers['access-control-allow-methods'].split(',').map((m: string) => m.trim())).toContain(method);
        expect(pre.headers['access-control-allow-headers'].toLowerCase()).toContain('x-csrf-token');
      }
      const foreign = await cors.http().options('/v1/auth/me').set('Origin', 'https://attacker.example').set('Access-Control-Request-Method', 'DELETE');
      expect(foreign.headers['access-control-allow-origin']).toBeUndefined();
      const simple = await cors.http().get('/health').set('Origin', 'https://app.example').expect(200);
      expect(simple.headers['access-control-allow-origin']).toBe('https://app.example');
      expect(simple.headers['access-control-expose-headers']).toContain('X-Request-Id');
      // the JWKS and discovery documents are public: any origin reads them, never with credentials
      for (const path of ['/.well-known/jwks.json', '/.well-known/openid-configuration', '/.well-known/oauth-authorization-server']) {
        for (const origin of ['https://attacker.example', 'https://app.example']) {
          const r = await cors.http().get(path).set('Origin', origin).expect(200);
          expect(r.headers['access-control-allow-origin']).toBe('*');
          expect(r.headers['access-control-allow-credentials']).toBeUndefined();
        }
        const pre = await cors.http().options(path).set('Origin', 'https://rp.example').set('Access-Control-Request-Method', 'GET');
        expect(pre.status).toBe(204);
        expect(pre.headers['access-control-allow-origin']).toBe('*');
      }
      const notPublic = await cors.http().get('/v1/auth/me').set('Origin', 'https://attacker.example');
      expect(notPublic.headers['access-control-allow-origin']).toBeUndefined();
      // an OPTIONS that is no preflight (no Origin, or no requested method) is answered as any
      // request no route takes, in the envelope: never the plugin's 400 text/plain, nor a CORS 204
      for (const [path, origin, status, code] of [
        ['/v1/auth/me', undefined, 405, 'request/method_not_allowed'],
        ['/v1/auth/me', 'https://app.example', 405, 'request/method_not_allowed'],
        ['/v1/nope', 'https://app.example', 404, 'request/not_found'],
        ['/.well-known/jwks.json', undefined, 405, 'request/method_not_allowed'],
      ] as const) {
        const req = cors.http().options(path);
        if (origin) req.set('Origin', origin);
        const r = await req;
        expect([r.status, r.headers['content-type'], r.body.code]).toEqual([status, 'application/problem+json; charset=utf-8', code]);
      }
      const oauth = await cors.http().options('/oauth/token');
      expect([oauth.status, oauth.body.error]).toEqual([405, 'invalid_request']);
      // a preflight the API's own request checks refuse (a %00 or a __proto__ in its query) is
      // answered as the same request's GET would be: problem+json, or RFC 6749 under /oauth
      for (const path of ['/v1/auth/me?a=%00', '/v1/auth/me?__proto__=1', '/.well-known/jwks.json?a=%00']) {
        const r = await cors.http().options(path).set('Origin', 'https://app.example').set('Access-Control-Request-Method', 'GET');
        expect([r.status, r.headers['content-type'], r.body.code, r.headers['x-request-id']]).toEqual([400, 'application/problem+json; charset=utf-8', 'request/invalid', expect.any(String)]);
      }
      const refusedOAuth = await cors.http().options('/oauth/token?a=%00').set('Origin', 'https://app.example').set('Access-Control-Request-Method', 'POST');
      expect([refusedOAuth.status, refusedOAuth.body]).toEqual([400, { error: 'invalid_request', error_description: expect.any(String) }]);
      // a document that does not exist is as public as the others: its 404 is readable cross-origin
      const missing = await cors.http().get('/.well-known/nope').set('Origin', 'https://rp.example').expect(404);
      expect(missing.headers['access-control-allow-origin']).toBe('*');
    } finally {
      await cors.close();
    }
    // without CORS_ORIGINS: no CORS for the API, the public documents as above (and no API header leaks onto them)
    const jwks = await t.http().get('/.well-known/jwks.json').set('Origin', 'https://rp.example').expect(200);
    expect(jwks.headers['access-control-allow-origin']).toBe('*');
    expect(jwks.headers['access-control-allow-credentials']).toBeUndefined();
    expect(jwks.headers['access-control-expose-headers']).toBeUndefined();
    const pre = await t.http().options('/.well-known/openid-configuration').set('Origin', 'https://rp.example').set('Access-Control-Request-Method', 'GET').expect(204);
    expect(pre.headers['access-control-allow-origin']).toBe('*');
    expect((await t.http().get('/health').set('Origin', 'https://rp.example').expect(200)).headers['access-control-allow-origin']).toBeUndefined();
    expect((await t.http().options('/v1/auth/me').set('Origin', 'https://rp.example').set('Access-Control-Request-Method', 'GET')).headers['access-control-allow-origin']).toBeUndefined();
  });

  it('a body that trickles in slower than HTTP_REQUEST_TIMEOUT_MS gets 408 problem+json and the connection closes', async () => {
    const slow = await createTestApp({ HTTP_REQUEST_TIMEOUT_MS: '1000' });
    try {
      const server = slow.app.getHttpServer();
      if (!server.listening) await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
      const { port } = server.address() as AddressInfo;
      const started = Date.now();
      const raw = await new Promise<string>((resolve, reject) => {
        let drip: NodeJS.Timeout | undefined;
        const s = connect(port, '127.0.0.1', () => {
          s.write('POST /v1/auth/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n{');
          // one byte every 200 ms: the socket is never idle, the request never complete
          drip = setInterval(() => s.writable && s.write(' '), 200);
        });
        let data = '';
        s.on('data', (c) => (data += c.toString()));
        s.on('close', () => {
          clearInterval(drip);
          resolve(data);
        });
        s.on('error', (e) => {
          clearInterval(drip);
          if (data) resolve(data);
          else reject(e);
        });
      });
      const took = Date.now() - started;
      expect(raw).toMatch(/^HTTP\/1\.1 408 /);
      expect(raw).toMatch(/content-type: application\/problem\+json/i);
      expect(raw).toMatch(/connection: close/i);
      expect(JSON.parse(raw.slice(raw.indexOf('\r\n\r\n') + 4))).toMatchObject({ status: 408, code: 'request/timeout', detail: 'The request did not arrive in time' });
      // answered within the timeout and one checking interval (a quarter of it), with slack for a loaded host
      expect(took).toBeGreaterThanOrEqual(900);
      expect(took).toBeLessThan(10_000);
      // a request that arrives in time on the same server is unaffected
      await slow.http().get('/health').expect(200);
    } finally {
      await slow.close();
    }
  });
});
