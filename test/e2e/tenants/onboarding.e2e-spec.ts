import { randomUUID } from 'crypto';
import http from 'http';
import { AddressInfo } from 'net';
import { createTestApp, randomIp, STRONG_PASSWORD, TestApp, uniqueEmail } from '../../setup/app';
import { sessionCookie } from '../../factories/dashboard.factory';
import { IdempotencyService } from '../../../src/shared/db/idempotency';

const valid = () => ({
  email: uniqueEmail('signup'),
  password: STRONG_PASSWORD,
  tenant_name: `Acme ${randomUUID().slice(0, 8)}`,
  consent_terms: true,
  consent_privacy: true,
});

describe('onboarding signup (spec 2.1)', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(() => t.close());

  const signup = (body: unknown, ip = randomIp()) => t.http().post('/v1/onboarding/signup').set('X-Forwarded-For', ip).send(body as object);

  it('creates the tenant (free tier, slug from the name), its owner and a dashboard session', async () => {
    const body = { ...valid(), tenant_name: 'Ünïcode & Co. Ltd' };
    const res = await signup(body).expect(201);
    expect(res.body).toEqual({
      tenant: { id: expect.any(String), slug: expect.stringMatching(/^unicode-co-ltd/), name: 'Ünïcode & Co. Ltd', tier: 'free' },
      user: { id: expect.any(String), email: body.email },
      csrf_token: expect.any(String),
    });
    const cookie = res.headers['set-cookie'][0];
    expect(cookie).toMatch(/authp_dashboard=/);
    expect(cookie).toMatch(/HttpOnly/i);
    expect(cookie).toMatch(/SameSite=Lax/i);
    const me = await t.http().get('/v1/auth/dashboard/me').set('Cookie', sessionCookie(res.headers['set-cookie'])).expect(200);
    expect(me.body.memberships).toEqual([{ tenant_id: res.body.tenant.id, tenant_slug: res.body.tenant.slug, role: 'owner' }]);
    const [row] = await t.db.query<{ password_hash: string }>(`SELECT password_hash FROM dashboard_users WHERE id = $1`, [res.body.user.id]);
    expect(row.password_hash).toMatch(/^\$argon2id\$/);
    const audit = await t.db.query(`SELECT 1 FROM audit_events WHERE tenant_id = $1 AND type = 'tenant.created'`, [res.body.tenant.id]);
    // no webhook outbox row: the tenant has no endpoint yet, and none created later receives it
    expect(await t.db.query(`SELECT 1 FROM outbox WHERE tenant_id = $1 AND topic = 'webhook'`, [res.body.tenant.id])).toHaveLength(0);
    expect(audit).toHaveLength(1);
  });

  it('gives two tenants with the same name distinct slugs', async () => {
    const name = `Same Name ${randomUUID().slice(0, 4)}`;
    const a = await signup({ ...valid(), tenant_name: name }).expect(201);
    const b = await signup({ ...valid(), tenant_name: name }).expect(201);
    expect(a.body.tenant.slug).not.toBe(b.body.tenant.slug);
  });

  it.each([
    ['email missing', { email: undefined }, 'email'],
    ['email malformed', { email: 'not-an-email' }, 'email'],
    ['email with a zero-width space before the @ (a look-alike of another address)', { email: 'owner\u200b@example.com' }, 'email'],
    ['password too short (11)', { password: 'a'.repeat(11) }, 'password'],
    ['password too long (129)', { password: 'a'.repeat(129) }, 'password'],
    ['password not a string', { password: 123456789012 }, 'password'],
    ['tenant_name too short (1)', { tenant_name: 'a' }, 'tenant_name'],
    ['tenant_name too long (51)', { tenant_name: 'a'.repeat(51) }, 'tenant_name'],
    ['tenant_name missing', { tenant_name: undefined }, 'tenant_name'],
    ['tenant_name of zero-width spaces only', { tenant_name: '\u200b\u200b\u200b' }, 'tenant_name'],
    ['tenant_name with a newline', { tenant_name: 'Acme\nInc' }, 'tenant_name'],
    ['tenant_name with a control character', { tenant_name: 'Acme\u0007' }, 'tenant_name'],
    ['tenant_name with a bidirectional override', { tenant_name: 'Acme \u202egnp.exe' }, 'tenant_name'],
    ['consent_terms false', { consent_terms: false }, 'consent_terms'],
    ['consent_terms missing', { consent_terms: undefined }, 'consent_terms'],
    ['consent_privacy false', { consent_privacy: false }, 'consent_privacy'],
    ['consent_privacy a string', { consent_privacy: 'true' }, 'consent_privacy'],
    ['consent_marketing not boolean', { consent_marketing: 'yes' }, 'consent_marketing'],
    ['idempotency_key shorter than 36', { idempotency_key: 'x'.repeat(35) }, 'idempotency_key'],
    ['unknown property', { plan: 'pro' }, 'plan'],
    ['unknown property named like a built-in one', { toString: 'x' }, 'toString'],
    ['unknown property constructor', { constructor: { name: 'x' } }, 'constructor'],
  ])('rejects %s with 400 request/invalid', async (_name, patch, field) => {
    const res = await signup({ ...valid(), ...patch }).expect(400);
    expect(res.headers['content-type']).toMatch(/application\/problem\+json/);
    expect(res.body).toMatchObject({ status: 400, code: 'request/invalid' });
    expect(res.body.errors.map((e: { field: string }) => e.field)).toContain(field);
  });

  it('accepts password lengths 12 and 128 and tenant_name lengths 2 and 50', async () => {
    await signup({ ...valid(), password: 'p'.repeat(12), tenant_name: 'ab' }).expect(201);
    await signup({ ...valid(), password: 'p'.repeat(128), tenant_name: 'n'.repeat(50) }).expect(201);
    // letters of any script, and emoji sequences joined by zero-width joiners
    await signup({ ...valid(), tenant_name: 'Müller & Søn 東京 \u{1F468}\u200D\u{1F469}\u200D\u{1F467}' }).expect(201);
  });

  it('answers malformed JSON with 400 and an oversized body with 413, never 5xx', async () => {
    const bad = await t.http().post('/v1/onboarding/signup').set('Content-Type', 'application/json').send('{"email":').expect(400);
    expect(bad.body.code).toBe('request/malformed_json');
    const big = await t
      .http()
      .post('/v1/onboarding/signup')
      .set('Content-Type', 'application/json')
      .send(JSON.stringify({ ...valid(), website: 'x'.repeat(200_000) }))
      .expect(413);
    expect(big.body.code).toBe('request/too_large');
  });

  it('creates nothing when the honeypot is filled (and answers like a success)', async () => {
    const body = { ...valid(), website: 'http://spam.example' };
    const res = await signup(body).expect(201);
    // the same headers as a real signup (a missing cookie would tell the bot), but the cookie opens nothing
    const real = await signup(valid()).expect(201);
    expect(Object.keys(res.headers).sort()).toEqual(Object.keys(real.headers).sort());
    const decoy = sessionCookie(res.headers['set-cookie']);
    expect(decoy).toMatch(/^authp_dashboard=.{20,}/);
    await t.http().get('/v1/auth/dashboard/me').set('Cookie', decoy).expect(401);
    const rows = await t.db.query(`SELECT 1 FROM tenants WHERE name = $1`, [body.tenant_name]);
    expect(rows).toHaveLength(0);
    const users = await t.db.query(`SELECT 1 FROM dashboard_users WHERE email_normalized = $1`, [body.email]);
    expect(users).toHaveLength(0);
  });

  it('the honeypot decoy cannot be told from a real signup: a taken name gets a suffixed slug, a taken email the same 409', async () => {
    const first = await signup(valid()).expect(201);
    const sameName = await signup({ ...valid(), tenant_name: first.body.tenant.name, website: 'x' }).expect(201);
    const realSameName = await signup({ ...valid(), tenant_name: first.body.tenant.name }).expect(201);
    for (const r of [sameName, realSameName]) expect(r.body.tenant.slug).toMatch(new RegExp(`^${first.body.tenant.slug}-[0-9a-f]{6}$`));
    const takenEmail = await signup({ ...valid(), email: first.body.user.email.toUpperCase(), website: 'x' }).expect(409);
    const realTakenEmail = await signup({ ...valid(), email: first.body.user.email.toUpperCase() }).expect(409);
    expect(takenEmail.body).toEqual({ ...realTakenEmail.body, request_id: takenEmail.body.request_id });
    expect(await t.db.query(`SELECT 1 FROM tenants WHERE name = $1`, [first.body.tenant.name])).toHaveLength(2);
  });

  it('the honeypot decoy keeps the idempotency and email promises a real signup keeps (nothing created)', async () => {
    const body = { ...valid(), website: 'http://spam.example', idempotency_key: randomUUID() };
    const a = await signup(body).expect(201);
    const b = await signup(body).expect(201);
    expect(b.body).toEqual(a.body);
    expect(sessionCookie(b.headers['set-cookie'])).toBe(sessionCookie(a.headers['set-cookie']));
    // as for a real key: another password or another request with the key is 409 idempotency/conflict
    expect((await signup({ ...body, password: 'another long password' }).expect(409)).body.code).toBe('idempotency/conflict');
    expect((await signup({ ...body, tenant_name: 'Other Name' }).expect(409)).body.code).toBe('idempotency/conflict');
    // the same email again without the key: taken, as a real one would be
    const again = await signup({ ...valid(), email: body.email, website: 'x' }).expect(409);
    expect(again.body.code).toBe('onboarding/email_exists');
    const plain = { ...valid(), website: 'y' };
    await signup(plain).expect(201);
    expect((await signup({ ...valid(), email: plain.email.toUpperCase(), website: 'y' }).expect(409)).body.code).toBe('onboarding/email_exists');
    expect(await t.db.query(`SELECT 1 FROM tenants WHERE name = ANY($1)`, [[body.tenant_name, plain.tenant_name]])).toHaveLength(0);
    expect(await t.db.query(`SELECT 1 FROM dashboard_users WHERE email_normalized = ANY($1)`, [[body.email, plain.email]])).toHaveLength(0);
  });

  it('a replay after the first session ended (logout, absolute timeout) opens a live session with its own csrf_token (review: a dead cookie with 201)', async () => {
    const body = { ...valid(), idempotency_key: randomUUID() };
    const a = await signup(body).expect(201);
    const first = sessionCookie(a.headers['set-cookie']);
    // the same answer while the session lives
    const same = await signup(body).expect(201);
    expect(sessionCookie(same.headers['set-cookie'])).toBe(first);
    expect(same.body).toEqual(a.body);
    await t.http().post('/v1/auth/dashboard/logout').set('Cookie', first).set('X-CSRF-Token', a.body.csrf_token).expect(204);
    const b = await signup(body).expect(201);
    const second = sessionCookie(b.headers['set-cookie']);
    expect(second).not.toBe(first);
    expect(b.body).toEqual({ ...a.body, csrf_token: expect.any(String) });
    expect(b.body.csrf_token).not.toBe(a.body.csrf_token);
    const me = await t.http().get('/v1/auth/dashboard/me').set('Cookie', second).expect(200);
    expect(me.body.user.id).toBe(a.body.user.id);
    // a sign-in as a login is: audited, last_login_at set
    expect(await t.db.query(`SELECT 1 FROM audit_events WHERE type = 'dashboard.signed_in' AND target_id = $1`, [a.body.user.id])).toHaveLength(1);
    expect((await t.db.query<{ set: boolean }>(`SELECT last_login_at IS NOT NULL AS set FROM dashboard_users WHERE id = $1`, [a.body.user.id]))[0].set).toBe(true);
    // the csrf_token answered is the live session's
    await t.http().post('/v1/auth/dashboard/logout').set('Cookie', second).set('X-CSRF-Token', b.body.csrf_token).expect(204);
    // the absolute timeout: the same
    const c = await signup(body).expect(201);
    await t.db.query(`UPDATE dashboard_sessions SET absolute_expires_at = now() - interval '1 second' WHERE user_id = $1 AND revoked_at IS NULL`, [a.body.user.id]);
    const d = await signup(body).expect(201);
    expect(sessionCookie(d.headers['set-cookie'])).not.toBe(sessionCookie(c.headers['set-cookie']));
    await t.http().get('/v1/auth/dashboard/me').set('Cookie', sessionCookie(d.headers['set-cookie'])).expect(200);
    // still nothing created twice
    expect(await t.db.query(`SELECT 1 FROM tenants WHERE id = $1`, [a.body.tenant.id])).toHaveLength(1);
    expect(await t.db.query(`SELECT 1 FROM dashboard_users WHERE id = $1`, [a.body.user.id])).toHaveLength(1);
  });

  it('replays the same answer for the same idempotency_key and creates nothing twice', async () => {
    const body = { ...valid(), idempotency_key: randomUUID() };
    const a = await signup(body).expect(201);
    const b = await signup(body).expect(201);
    expect(b.body).toEqual(a.body);
    expect(sessionCookie(b.headers['set-cookie'])).toBe(sessionCookie(a.headers['set-cookie']));
    const rows = await t.db.query(`SELECT 1 FROM tenants WHERE name = $1`, [body.tenant_name]);
    expect(rows).toHaveLength(1);
  });

  it('a replay that spells out a default (consent_marketing: false, website: "") or changes the email case is the same request', async () => {
    const body = { ...valid(), idempotency_key: randomUUID() };
    const a = await signup(body).expect(201);
    const b = await signup({ ...body, consent_marketing: false, website: '', email: body.email.toUpperCase() }).expect(201);
    expect(b.body).toEqual(a.body);
    // a default changed is another request
    expect((await signup({ ...body, consent_marketing: true }).expect(409)).body.code).toBe('idempotency/conflict');
  });

  it('gives parallel calls with one idempotency_key one tenant and one answer', async () => {
    const body = { ...valid(), idempotency_key: randomUUID() };
    const results = await Promise.all(Array.from({ length: 6 }, () => signup(body)));
    for (const r of results) expect(r.status).toBe(201);
    for (const r of results) expect(r.body).toEqual(results[0].body);
    const rows = await t.db.query(`SELECT 1 FROM tenants WHERE name = $1`, [body.tenant_name]);
    expect(rows).toHaveLength(1);
    const users = await t.db.query(`SELECT 1 FROM dashboard_users WHERE email_normalized = $1`, [body.email]);
    expect(users).toHaveLength(1);
  });

  it('a replay without the password is no replay: the key alone never hands out the owner session (409, no cookie)', async () => {
    const body = { ...valid(), idempotency_key: randomUUID() };
    const first = await signup(body).expect(201);
    const attacker = await signup({ ...body, password: 'attacker guess 0000 xyz' }).expect(409);
    expect(attacker.body.code).toBe('idempotency/conflict');
    expect(attacker.headers['set-cookie']).toBeUndefined();
    expect(JSON.stringify(attacker.body)).not.toContain(first.body.csrf_token);
    // the client that really sent it can still retry
    const retry = await signup(body).expect(201);
    expect(retry.body).toEqual(first.body);
  });

  it('refuses the same idempotency_key with a different request (409)', async () => {
    const key = randomUUID();
    await signup({ ...valid(), idempotency_key: key }).expect(201);
    const res = await signup({ ...valid(), idempotency_key: key }).expect(409);
    expect(res.body.code).toBe('idempotency/conflict');
  });

  it('refuses an email that already has a dashboard account (409)', async () => {
    const body = valid();
    await signup(body).expect(201);
    const res = await signup({ ...valid(), email: body.email.toUpperCase() }).expect(409);
    expect(res.body.code).toBe('onboarding/email_exists');
  });

  it('refuses the fullwidth spelling of an email that already has a dashboard account (409: emails compare in NFKC)', async () => {
    const body = valid();
    await signup(body).expect(201);
    const [local, domain] = body.email.split('@');
    const fullwidth = [...local].map((c) => String.fromCharCode(c.charCodeAt(0) + 0xfee0)).join(''); // ｓｉｇｎｕｐ．…
    const res = await signup({ ...valid(), email: `${fullwidth}@${domain}` }).expect(409);
    expect(res.body.code).toBe('onboarding/email_exists');
  });

  it('limits signups per client address (429 with Retry-After and X-Service-Docs)', async () => {
    const ip = randomIp();
    for (let i = 0; i < 5; i++) await signup(valid(), ip).expect(201);
    const res = await signup(valid(), ip).expect(429);
    expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
    expect(res.headers['x-service-docs']).toBeTruthy();
    await signup(valid(), randomIp()).expect(201);
  });
});

describe('onboarding signup with a bot challenge (TURNSTILE_SECRET set)', () => {
  let t: TestApp;
  let server: http.Server;
  const seen: URLSearchParams[] = [];
  const elsewhere: string[] = [];
  const spent = new Set<string>();
  beforeAll(async () => {
    // a real siteverify peer speaking the Turnstile protocol
    server = http.createServer((req, res) => {
      let data = '';
      req.on('data', (c) => (data += c));
      req.on('end', () => {
        const form = new URLSearchParams(data);
        if (req.url !== '/siteverify') {
          elsewhere.push(data);
          return res.end(JSON.stringify({ success: true }));
        }
        seen.push(form);
        if (form.get('response') === 'redirected-token') {
          res.writeHead(307, { location: '/elsewhere' });
          return res.end();
        }
        res.setHeader('content-type', 'application/json');
        if (form.get('response') === 'huge-token') return res.end(JSON.stringify({ success: true, padding: 'x'.repeat(2_000_000) }));
        if (form.get('response') === 'failing-token') {
          res.statusCode = 500;
          return res.end(JSON.stringify({ success: true }));
        }
        const secretOk = form.get('secret') === 'ts-secret';
        // a real token is single-use: siteverify refuses it the second time
        const response = form.get('response') ?? '';
        if (secretOk && response.startsWith('once-')) {
          const first = !spent.has(response);
          spent.add(response);
          return res.end(JSON.stringify(first ? { success: true, hostname: 'app.example.com' } : { success: false, 'error-codes': ['timeout-or-duplicate'] }));
        }
        // a real token names the site it was solved on; one solved on another site sharing the site key is valid there
        if (secretOk && form.get('response') === 'elsewhere-token') return res.end(JSON.stringify({ success: true, hostname: 'phish.example' }));
        res.end(JSON.stringify(form.get('response') === 'good-token' && secretOk ? { success: true, hostname: 'App.Example.com' } : { success: false, 'error-codes': ['invalid-input-response'] }));
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as AddressInfo).port;
    t = await createTestApp({
      TURNSTILE_SECRET: 'ts-secret',
      TURNSTILE_SITEVERIFY_URL: `http://127.0.0.1:${port}/siteverify`,
      TURNSTILE_HOSTNAMES: 'app.example.com, www.example.com',
    });
  });
  afterAll(async () => {
    await t.close();
    await new Promise((r) => server.close(r));
  });

  it('requires a token, refuses a bad one and accepts a good one', async () => {
    const send = (extra: object) => t.http().post('/v1/onboarding/signup').set('X-Forwarded-For', randomIp()).send({ ...valid(), ...extra });
    expect((await send({}).expect(400)).body.code).toBe('onboarding/bot_check_failed');
    expect((await send({ turnstile_token: 'bad' }).expect(400)).body.code).toBe('onboarding/bot_check_failed');
    await send({ turnstile_token: 'good-token' }).expect(201);
    expect(seen[seen.length - 1].get('remoteip')).toBeTruthy();
    // a filled honeypot is checked after the bot challenge, as a real signup is: no tell either way
    expect((await send({ website: 'x' }).expect(400)).body.code).toBe('onboarding/bot_check_failed');
    await send({ website: 'x', turnstile_token: 'good-token' }).expect(201);
  });

  it('a resent request (same idempotency_key and request) gets the first answer although its single-use token is spent; another request with that key is checked', async () => {
    const ip = randomIp();
    const body = { ...valid(), idempotency_key: randomUUID(), turnstile_token: `once-${randomUUID()}` };
    const first = await t.http().post('/v1/onboarding/signup').set('X-Forwarded-For', ip).send(body).expect(201);
    const calls = seen.length;
    const again = await t.http().post('/v1/onboarding/signup').set('X-Forwarded-For', ip).send(body).expect(201);
    expect(again.body).toEqual(first.body);
    expect(again.headers['set-cookie']).toBeDefined();
    expect(seen.length).toBe(calls); // the spent token was not sent to siteverify again
    expect(await t.db.query(`SELECT 1 FROM tenants WHERE name = $1`, [body.tenant_name])).toHaveLength(1);
    // the same key for another request is checked as any new request: the spent token fails
    const other = await t.http().post('/v1/onboarding/signup').set('X-Forwarded-For', ip).send({ ...body, tenant_name: 'Another Name' }).expect(400);
    expect(other.body.code).toBe('onboarding/bot_check_failed');
    // a new request whose token was spent by another is refused
    const reuse = await t.http().post('/v1/onboarding/signup').set('X-Forwarded-For', randomIp()).send({ ...valid(), turnstile_token: body.turnstile_token }).expect(400);
    expect(reuse.body.code).toBe('onboarding/bot_check_failed');
  });

  it('two parallel calls with one idempotency_key and one single-use token: both get the one answer (they share one verification), one tenant', async () => {
    for (let round = 0; round < 3; round++) {
      const ip = randomIp();
      const body = { ...valid(), idempotency_key: randomUUID(), turnstile_token: `once-${randomUUID()}` };
      const calls = seen.length;
      const [a, b] = await Promise.all([0, 1].map(() => t.http().post('/v1/onboarding/signup').set('X-Forwarded-For', ip).send(body)));
      expect([a.status, b.status, a.body.code, b.body.code]).toEqual([201, 201, undefined, undefined]);
      expect(b.body).toEqual(a.body);
      expect(seen.length).toBe(calls + 1); // the token went to siteverify once
      expect(await t.db.query(`SELECT 1 FROM tenants WHERE name = $1`, [body.tenant_name])).toHaveLength(1);
      // the verdict is not shared with another request presenting the token (the same key included)
      const other = { ...body, tenant_name: `${body.tenant_name} 2`, email: uniqueEmail('other') };
      const c = await t.http().post('/v1/onboarding/signup').set('X-Forwarded-For', ip).send(other);
      expect([c.status, c.body.code]).toEqual([400, 'onboarding/bot_check_failed']);
    }
  });

  it('a token presented by two different requests at once: siteverify decides for each (one passes, the other is refused)', async () => {
    const token = `once-${randomUUID()}`;
    const bodies = [0, 1].map(() => ({ ...valid(), idempotency_key: randomUUID(), turnstile_token: token }));
    const rs = await Promise.all(bodies.map((b) => t.http().post('/v1/onboarding/signup').set('X-Forwarded-For', randomIp()).send(b)));
    expect(rs.map((r) => r.status).sort()).toEqual([201, 400]);
    expect(rs.find((r) => r.status === 400)!.body.code).toBe('onboarding/bot_check_failed');
  });

  it('a resend whose key expired between the check and the replay is refused, never created without the bot challenge (replayOnly)', async () => {
    const idempotency = t.app.get(IdempotencyService);
    const key = randomUUID();
    let ran = false;
    const run = idempotency.run('signup', key, 'some-request', async () => {
      ran = true;
      return { status: 201, body: {} };
    }, { replayOnly: true });
    await expect(run).rejects.toMatchObject({ code: 'idempotency/conflict' });
    expect(ran).toBe(false);
    expect(await idempotency.holds('signup', key, 'some-request')).toBe(false);
  });

  it('refuses a token solved on a host outside TURNSTILE_HOSTNAMES, creating nothing', async () => {
    const email = `elsewhere-${Date.now()}@example.com`;
    const res = await t.http().post('/v1/onboarding/signup').set('X-Forwarded-For', randomIp()).send({ ...valid(), email, turnstile_token: 'elsewhere-token' }).expect(400);
    expect(res.body.code).toBe('onboarding/bot_check_failed');
    expect(await t.db.query(`SELECT 1 FROM dashboard_users WHERE email_normalized = $1`, [email])).toHaveLength(0);
  });

  it('fails closed (503), creating nothing, when siteverify redirects (the secret is not re-posted elsewhere), answers an oversized body or an error status', async () => {
    for (const token of ['redirected-token', 'huge-token', 'failing-token']) {
      const body = { ...valid(), turnstile_token: token };
      const res = await t.http().post('/v1/onboarding/signup').set('X-Forwarded-For', randomIp()).send(body).expect(503);
      expect(res.body.code).toBe('server/unavailable');
      expect(await t.db.query(`SELECT 1 FROM tenants WHERE name = $1`, [body.tenant_name])).toHaveLength(0);
    }
    expect(elsewhere).toEqual([]);
  });
});

describe('onboarding signup: a replay proves the password like a sign-in', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp({ RATE_LIMIT_SIGNUP_PER_MIN: '100' });
  });
  afterAll(() => t.close());

  it('wrong passwords on a replay are counted by the failed sign-in throttle: past 5 from one address, 429 auth/login_throttled, even for the right one', async () => {
    const body = { ...valid(), idempotency_key: randomUUID() };
    const send = (b: object, ip: string) => t.http().post('/v1/onboarding/signup').set('X-Forwarded-For', ip).send(b);
    await send(body, randomIp()).expect(201);
    const attacker = randomIp();
    for (let i = 0; i < 5; i++) expect((await send({ ...body, password: `attacker guess ${i} xyzw` }, attacker).expect(409)).body.code).toBe('idempotency/conflict');
    const blocked = await send(body, attacker).expect(429);
    expect(blocked.body.code).toBe('auth/login_throttled');
    // the owner's own retry from elsewhere still gets its answer
    await send(body, randomIp()).expect(201);
  });

  it('a right password on a replay clears the address\'s failures for a honeypot decoy as for a real signup (the throttle tells them apart no more than the answers do)', async () => {
    const send = (b: object, ip: string) => t.http().post('/v1/onboarding/signup').set('X-Forwarded-For', ip).send(b);
    const wrongBeforeBlock = async (body: Record<string, unknown>) => {
      const ip = randomIp();
      await send(body, ip).expect(201);
      for (let i = 0; i < 4; i++) await send({ ...body, password: `wrong guess ${i} abcdefgh` }, ip).expect(409);
      await send(body, ip).expect(201);
      let n = 0;
      while ((await send({ ...body, password: `wrong guess again ${n} abcd` }, ip)).status === 409) n++;
      return n;
    };
    const real = await wrongBeforeBlock({ ...valid(), idempotency_key: randomUUID() });
    const decoy = await wrongBeforeBlock({ ...valid(), idempotency_key: randomUUID(), website: 'x' });
    expect(real).toBe(5);
    expect(decoy).toBe(real);
  });
});
