import { createSign } from 'crypto';
import { AddressInfo } from 'net';
import { createRemoteJWKSet, decodeProtectedHeader, jwtVerify } from 'jose';
import * as argon2 from 'argon2';
import jwt from 'jsonwebtoken';
import * as oauth from 'oauth4webapi';
import { createTestApp, randomIp, STRONG_PASSWORD, TestApp, uniqueEmail } from '../../setup/app';
import { createTenant, TenantFixture } from '../../factories/tenant.factory';
import { JWKS_MAX_AGE_SECONDS, SigningKeysService } from '../../../src/shared/crypto/signing-keys.service';
import { createIsolatedTestApp } from '../../setup/isolated-db';
import { Db } from '../../../src/shared/db/db.service';
import { EnvelopeCipher } from '../../../src/shared/crypto/envelope-cipher';
import { APP_CONFIG } from '../../../src/config/config';
import { REDIS } from '../../../src/shared/redis/redis.module';
import { LoginThrottleService, passwordSignInRealm } from '../../../src/shared/rate-limit/login-throttle.service';
import { RateLimitedError } from '../../../src/shared/errors/app-error';
import { EventsService } from '../../../src/shared/events/events.service';

describe('end users: register, login, me, logout (contract "End users")', () => {
  let t: TestApp;
  let tenant: TenantFixture;
  let other: TenantFixture;
  let baseUrl: string;
  beforeAll(async () => {
    t = await createTestApp();
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    baseUrl = `http://127.0.0.1:${(t.app.getHttpServer().address() as AddressInfo).port}`;
    tenant = await createTenant(t.db);
    other = await createTenant(t.db);
  });
  afterAll(() => t.close());

  const register = (body: object, key = tenant.apiKey, ip = randomIp()) => t.http().post('/v1/auth/register').set('X-API-Key', key).set('X-Forwarded-For', ip).send(body);
  const login = (body: object, key = tenant.apiKey, ip = randomIp()) => t.http().post('/v1/auth/login').set('X-API-Key', key).set('X-Forwarded-For', ip).send(body);
  const valid = () => ({ email: uniqueEmail(), password: STRONG_PASSWORD, consent: true });

  it('an email is one address whatever its Unicode normalization form: NFC then NFD is 409 user/email_exists, and login works with either form', async () => {
    const tag = Math.random().toString(36).slice(2, 10);
    const nfc = `Jos\u00e9.${tag}@example.com`;
    const nfd = `jose\u0301.${tag}@example.com`;
    expect(nfc.normalize('NFD').toLowerCase()).toBe(nfd);
    const created = await register({ email: nfc, password: STRONG_PASSWORD, consent: true }).expect(201);
    expect((await register({ email: nfd, password: STRONG_PASSWORD, consent: true }).expect(409)).body.code).toBe('user/email_exists');
    const viaNfd = await login({ email: nfd, password: STRONG_PASSWORD }).expect(200);
    expect(viaNfd.body.user.id).toBe(created.body.user.id);
    // the other way round too
    const tag2 = Math.random().toString(36).slice(2, 10);
    const first = await register({ email: `jose\u0301.${tag2}@example.com`, password: STRONG_PASSWORD, consent: true }).expect(201);
    expect((await register({ email: `jos\u00e9.${tag2}@example.com`, password: STRONG_PASSWORD, consent: true }).expect(409)).body.code).toBe('user/email_exists');
    expect((await login({ email: `JOS\u00c9.${tag2}@example.com`, password: STRONG_PASSWORD }).expect(200)).body.user.id).toBe(first.body.user.id);
  });

  it('compatibility forms are one address (NFKC): fullwidth then ASCII is 409 user/email_exists, and login works with either', async () => {
    const tag = Math.random().toString(36).slice(2, 10);
    const ascii = `john.${tag}@example.com`;
    const fullwidth = `\uff4a\uff4f\uff48\uff4e.${tag}@example.com`; // ｊｏｈｎ
    const created = await register({ email: fullwidth, password: STRONG_PASSWORD, consent: true }).expect(201);
    expect(created.body.user.email).toBe(ascii); // stored and mailed in NFKC (the mailbox the key names)
    expect((await register({ email: ascii, password: STRONG_PASSWORD, consent: true }).expect(409)).body.code).toBe('user/email_exists');
    expect((await login({ email: ascii, password: STRONG_PASSWORD }).expect(200)).body.user.id).toBe(created.body.user.id);
    expect((await login({ email: `\uff2a\uff2f\uff28\uff2e.${tag}@example.com`, password: STRONG_PASSWORD }).expect(200)).body.user.id).toBe(created.body.user.id);
    // ASCII first, then the fullwidth spelling
    const tag2 = Math.random().toString(36).slice(2, 10);
    const first = await register({ email: `john.${tag2}@example.com`, password: STRONG_PASSWORD, consent: true }).expect(201);
    expect((await register({ email: `\uff4a\uff4f\uff48\uff4e.${tag2}@example.com`, password: STRONG_PASSWORD, consent: true }).expect(409)).body.code).toBe('user/email_exists');
    expect((await login({ email: `\uff4a\uff4f\uff48\uff4e.${tag2}@example.com`, password: STRONG_PASSWORD }).expect(200)).body.user.id).toBe(first.body.user.id);
  });

  it('a ligature is its letters: \ufb01le then file is 409 user/email_exists, and login works with either', async () => {
    const tag = Math.random().toString(36).slice(2, 10);
    const created = await register({ email: `\ufb01le.${tag}@example.com`, password: STRONG_PASSWORD, consent: true }).expect(201);
    expect((await register({ email: `file.${tag}@example.com`, password: STRONG_PASSWORD, consent: true }).expect(409)).body.code).toBe('user/email_exists');
    expect((await login({ email: `FILE.${tag}@example.com`, password: STRONG_PASSWORD }).expect(200)).body.user.id).toBe(created.body.user.id);
    expect((await login({ email: `\ufb01le.${tag}@example.com`, password: STRONG_PASSWORD }).expect(200)).body.user.id).toBe(created.body.user.id);
  });

  it('final sigma: \u03c3\u03b1\u03c3 signs in as \u03a3\u0391\u03a3 and \u03c3\u03b1\u03c2 (case folding maps \u03c2 to \u03c3), and those spellings are 409', async () => {
    const tag = Math.random().toString(36).slice(2, 10);
    const created = await register({ email: `${tag}.\u03c3\u03b1\u03c3@example.com`, password: STRONG_PASSWORD, consent: true }).expect(201);
    // toLowerCase alone turns the capital sigma before "@" (end of a word) into \u03c2
    expect(`${tag}.\u03a3\u0391\u03a3@example.com`.toLowerCase()).toBe(`${tag}.\u03c3\u03b1\u03c2@example.com`);
    expect((await login({ email: `${tag}.\u03a3\u0391\u03a3@example.com`, password: STRONG_PASSWORD }).expect(200)).body.user.id).toBe(created.body.user.id);
    expect((await login({ email: `${tag}.\u03c3\u03b1\u03c2@example.com`, password: STRONG_PASSWORD }).expect(200)).body.user.id).toBe(created.body.user.id);
    expect((await register({ email: `${tag}.\u03a3\u0391\u03a3@example.com`, password: STRONG_PASSWORD, consent: true }).expect(409)).body.code).toBe('user/email_exists');
  });

  it('registers: 201 token response; the access token verifies against the JWKS with an independent JOSE library', async () => {
    const body = valid();
    const res = await register(body).expect(201);
    expect(res.body).toEqual({
      access_token: expect.any(String),
      refresh_token: expect.stringMatching(/^[0-9a-f-]{36}:[A-Za-z0-9_-]{43}$/),
      expires_in: 900,
      token_type: 'Bearer',
      user: { id: expect.any(String), email: body.email, email_verified: false, is_anonymous: false, created_at: expect.any(String) },
    });
    const jwks = createRemoteJWKSet(new URL(`${baseUrl}/.well-known/jwks.json`));
    // as a resource server with a standard RFC 9068 validator checks it: typ at+jwt
    const { payload, protectedHeader } = await jwtVerify(res.body.access_token, jwks, { issuer: 'http://localhost:3001', audience: 'http://localhost:3001', algorithms: ['RS256'], typ: 'at+jwt' });
    expect(protectedHeader).toEqual({ alg: 'RS256', typ: 'at+jwt', kid: expect.any(String) });
    expect(payload).toMatchObject({
      sub: res.body.user.id,
      tenant_id: tenant.id,
      scope: 'openid profile email',
      amr: ['pwd'],
      aal: 'AAL1',
      role: 'member',
      is_anonymous: false,
    });
    expect(payload.sid).toEqual(expect.any(String));
    expect(payload.jti).toEqual(expect.any(String));
    expect(payload.exp! - payload.iat!).toBe(900);
    // and as one with oauth4webapi's RFC 9068 validator, which also requires client_id (section 2.2): the tenant
    const as: oauth.AuthorizationServer = { issuer: 'http://localhost:3001', jwks_uri: `${baseUrl}/.well-known/jwks.json` };
    const req = new Request(`${baseUrl}/resource`, { headers: { authorization: `Bearer ${res.body.access_token}` } });
    const validated = await oauth.validateJwtAccessToken(as, req, 'http://localhost:3001', { [oauth.allowInsecureRequests]: true });
    expect(validated).toMatchObject({ sub: res.body.user.id, client_id: tenant.id });
  });

  it('normalizes emails: unique per tenant case-insensitively, free in another tenant', async () => {
    const email = uniqueEmail('Case');
    await register({ ...valid(), email: email.toUpperCase() }).expect(201);
    const dup = await register({ ...valid(), email: `  ${email.toLowerCase()}` }).expect((r) => expect([400, 409]).toContain(r.status));
    if (dup.status === 409) expect(dup.body.code).toBe('user/email_exists');
    expect((await register({ ...valid(), email: email.toLowerCase() }).expect(409)).body.code).toBe('user/email_exists');
    await register({ ...valid(), email: email.toLowerCase() }, other.apiKey).expect(201);
    await login({ email: email.toLowerCase(), password: STRONG_PASSWORD }).expect(200);
  });

  it.each([
    ['email missing', { email: undefined }, 'email'],
    ['email malformed', { email: 'x@' }, 'email'],
    ['email with a zero-width space', { email: 'a\u200b@example.com' }, 'email'],
    ['email with a soft hyphen in the domain', { email: 'a@exam\u00adple.com' }, 'email'],
    ['email with a word joiner after the domain', { email: 'a@example.com\u2060' }, 'email'],
    ['email with a combining grapheme joiner', { email: 'a@e\u034fxample.com' }, 'email'],
    ['email with an ideographic space', { email: 'a\u3000xyz@example.com' }, 'email'],
    ['email with an en space', { email: 'a\u2002xyz@example.com' }, 'email'],
    ['password 11 chars', { password: 'p'.repeat(11) }, 'password'],
    ['password 129 chars', { password: 'p'.repeat(129) }, 'password'],
    ['consent missing', { consent: undefined }, 'consent'],
    ['consent false', { consent: false }, 'consent'],
    ['date_of_birth wrong pattern', { date_of_birth: '01/02/2000' }, 'date_of_birth'],
    ['date_of_birth not a real date', { date_of_birth: '2001-02-30' }, 'date_of_birth'],
    ['date_of_birth in the future', { date_of_birth: `${new Date().getUTCFullYear() + 1}-01-01` }, 'date_of_birth'],
    ['date_of_birth before 1900', { date_of_birth: '1899-12-31' }, 'date_of_birth'],
    ['age_verification_token empty', { age_verification_token: '' }, 'age_verification_token'],
    ['invite_token longer than 512', { invite_token: 'x'.repeat(513) }, 'invite_token'],
    ['unknown property', { nickname: 'bob' }, 'nickname'],
  ])('register rejects %s with 400 request/invalid', async (_n, patch, field) => {
    const res = await register({ ...valid(), ...patch }).expect(400);
    expect(res.body.code).toBe('request/invalid');
    expect(res.body.errors.map((e: { field: string }) => e.field)).toContain(field);
  });

  it('accepts zero-width joiners where they shape the word (Persian ZWNJ, Sinhala and Devanagari ZWJ after a virama: IDNA CONTEXTJ), not where they change nothing on screen', async () => {
    await register({ ...valid(), email: `u${Date.now()}@\u0645\u06cc\u200c\u0647\u0627.example` }).expect(201);
    await register({ ...valid(), email: `\u0645\u06cc\u200c\u0647\u0627${Date.now()}@example.com` }).expect(201);
    await register({ ...valid(), email: `\u0dc1\u0dca\u200d\u0dbb\u0dd3${Date.now()}@example.com` }).expect(201);
    await register({ ...valid(), email: `\u0915\u094d\u200d\u0937${Date.now()}@example.com` }).expect(201);
    // Bengali ra + ZWJ + virama + ya (the Unicode Standard's ya-phala after ra, as in র‍্যাব)
    await register({ ...valid(), email: `\u09b0\u200d\u09cd\u09af\u09be\u09ac${Date.now()}@example.com` }).expect(201);
    await register({ ...valid(), email: `ev\u200dil${Date.now()}@example.com` }).expect(400);
  });

  it.each([
    ['a ZWJ between two Cyrillic letters', '\u043a\u043e\u200d\u0442'],
    ['a ZWNJ between two accented Latin letters', 'jos\u00e9\u200c\u00e9'],
    ['a ZWJ between two Han characters', '\u4e2d\u200d\u6587'],
    ['a ZWNJ ending a Persian word', '\u0645\u06cc\u200c'],
    ['U+2065 (unassigned, default ignorable) in an ASCII local part', 'adm\u2065in'],
    ['an unassigned code point (U+0378)', 'a\u0378b'],
    ['a Mongolian free variation selector (default ignorable)', '\u1820\u180b\u1821'],
    ['a ZWNJ after a Persian letter that never joins to the left (platform IDNA lets it through)', '\u06a9\u0648\u200c\u0686\u0647'],
  ])('refuses an address that reads as another (%s): 400, no second account', async (_n, local) => {
    const tag = `.${Date.now()}${Math.random().toString(36).slice(2, 6)}`;
    const plain = `${local.replace(/\u200c|\u200d|\u2065|\u0378|\u180b/g, '')}${tag}@example.com`;
    await register({ ...valid(), email: plain }).expect(201);
    const res = await register({ ...valid(), email: `${local}${tag}@example.com` }).expect(400);
    expect(res.body.errors.map((e: { field: string }) => e.field)).toEqual(['email']);
  });

  it('accepts an internationalized address (a U-label domain is what IDNA sends to DNS)', async () => {
    const res = await register({ ...valid(), email: `jos\u00e9.${Date.now()}@m\u00fcnchen.example` }).expect(201);
    expect(res.body.user.email).toMatch(/@m\u00fcnchen\.example$/);
  });

  it('requires date_of_birth under minor protection, stores it encrypted and never echoes it', async () => {
    const minor = await createTenant(t.db, { minor_protection_enabled: true });
    const missing = await register(valid(), minor.apiKey).expect(400);
    expect(missing.body.code).toBe('user/date_of_birth_required');
    const res = await register({ ...valid(), date_of_birth: '2001-07-14' }, minor.apiKey).expect(201);
    expect(JSON.stringify(res.body)).not.toContain('2001-07-14');
    expect(Buffer.from(res.body.access_token.split('.')[1], 'base64url').toString()).not.toContain('2001');
    const [row] = await t.db.query<{ date_of_birth_enc: string }>(`SELECT date_of_birth_enc FROM users WHERE id = $1`, [res.body.user.id]);
    expect(row.date_of_birth_enc).toMatch(/^v1\./);
    expect(row.date_of_birth_enc).not.toContain('2001-07-14');
    const me = await t.http().get('/v1/auth/me').set('Authorization', `Bearer ${res.body.access_token}`).expect(200);
    expect(JSON.stringify(me.body)).not.toContain('2001');
  });

  it('an invite_token or age_verification_token names nothing this service issued: 400 naming the field, nothing created (never silently dropped)', async () => {
    const minor = await createTenant(t.db, { minor_protection_enabled: true });
    for (const [field, code, key] of [
      ['invite_token', 'user/invite_invalid', tenant.apiKey],
      ['age_verification_token', 'user/age_verification_invalid', tenant.apiKey],
      ['age_verification_token', 'user/age_verification_invalid', minor.apiKey],
    ] as const) {
      const body = { ...valid(), [field]: 'tok-123', ...(key === minor.apiKey ? { date_of_birth: '2001-07-14' } : {}) };
      const res = await register(body, key).expect(400);
      expect(res.body).toMatchObject({ code, errors: [{ field }] });
      expect(await t.db.query(`SELECT 1 FROM users WHERE email = $1`, [body.email])).toHaveLength(0);
    }
    // a guest claim with one is refused the same way, and the guest stays a guest
    const guests = await createTenant(t.db, { anonymous_signins_enabled: true });
    const g = await t.http().post('/v1/auth/anonymous').set('X-API-Key', guests.apiKey).set('X-Forwarded-For', randomIp()).send({}).expect(201);
    const claim = await t.http().post('/v1/auth/register').set('X-API-Key', guests.apiKey).set('Authorization', `Bearer ${g.body.access_token}`).set('X-Forwarded-For', randomIp()).send({ ...valid(), invite_token: 'x' }).expect(400);
    expect(claim.body.code).toBe('user/invite_invalid');
    const [u] = await t.db.query<{ is_anonymous: boolean }>(`SELECT is_anonymous FROM users WHERE id = $1`, [g.body.user.id]);
    expect(u.is_anonymous).toBe(true);
  });

  it('logs in; an unknown email and a wrong password get the same 401 body', async () => {
    const body = valid();
    await register(body).expect(201);
    const ok = await login({ email: body.email, password: body.password }).expect(200);
    expect(ok.body.token_type).toBe('Bearer');
    expect(ok.body.user.email).toBe(body.email);
    const wrong = await login({ email: body.email, password: 'wrong password!!' }).expect(401);
    const unknown = await login({ email: uniqueEmail(), password: 'wrong password!!' }).expect(401);
    expect({ ...wrong.body, request_id: 0 }).toEqual({ ...unknown.body, request_id: 0 });
    expect(wrong.body.code).toBe('auth/invalid_credentials');
    // a user of another tenant cannot log in with this tenant's key
    await login({ email: body.email, password: body.password }, other.apiKey).expect(401);
  });

  it('moves a hash made with older argon2id parameters to the configured ones at the next successful login only', async () => {
    const body = valid();
    const reg = await register(body).expect(201);
    const old = await argon2.hash(body.password, { type: argon2.argon2id, memoryCost: 2048, timeCost: 2, parallelism: 1 });
    await t.db.query(`UPDATE users SET password_hash = $2 WHERE id = $1`, [reg.body.user.id, old]);
    const stored = async () => (await t.db.query<{ password_hash: string }>(`SELECT password_hash FROM users WHERE id = $1`, [reg.body.user.id]))[0].password_hash;
    await login({ email: body.email, password: 'wrong password!!' }).expect(401);
    expect(await stored()).toBe(old);
    await login({ email: body.email, password: body.password }).expect(200);
    const upgraded = await stored();
    expect(upgraded).not.toBe(old);
    expect(upgraded).toMatch(/^\$argon2id\$v=19\$m=1024,p=1,t=1\$/); // NODE_ENV=test parameters
    expect(await argon2.verify(upgraded, body.password)).toBe(true);
    await login({ email: body.email, password: body.password }).expect(200);
    expect(await stored()).toBe(upgraded); // current hashes are left alone
  });

  it.each([
    ['email missing', { password: STRONG_PASSWORD }],
    ['password 11 chars', { email: 'a@b.co', password: 'p'.repeat(11) }],
    ['password 129 chars', { email: 'a@b.co', password: 'p'.repeat(129) }],
    ['extra property', { email: 'a@b.co', password: STRONG_PASSWORD, remember: true }],
  ])('login rejects %s with 400', async (_n, body) => {
    expect((await login(body).expect(400)).body.code).toBe('request/invalid');
  });

  it('throttles failed logins per account and address (429 auth/login_throttled) without locking out the owner elsewhere', async () => {
    const body = valid();
    await register(body).expect(201);
    const ip = randomIp();
    for (let i = 0; i < 5; i++) await login({ email: body.email, password: 'wrong password!!' }, tenant.apiKey, ip).expect(401);
    const res = await login({ email: body.email, password: body.password }, tenant.apiKey, ip).expect(429);
    expect(res.body.code).toBe('auth/login_throttled');
    expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
    await login({ email: body.email, password: body.password }, tenant.apiKey, randomIp()).expect(200);
  });

  it('a wrong password for an account is audited user.sign_in_failed (medium, hash prefixes only), the first of each failure window; an unknown address writes none', async () => {
    const body = valid();
    const id = (await register(body).expect(201)).body.user.id as string;
    const failed = () =>
      t.db.query<{ severity: string; actor_type: string; metadata: Record<string, unknown> }>(
        `SELECT severity, actor_type, metadata FROM audit_events WHERE tenant_id = $1 AND type = 'user.sign_in_failed' AND target_id = $2`,
        [tenant.id, id],
      );
    await login({ email: body.email, password: 'wrong password!!' }, tenant.apiKey, randomIp()).expect(401);
    await login({ email: body.email, password: 'wrong password again' }, tenant.apiKey, randomIp()).expect(401);
    const rows = await failed();
    expect(rows).toEqual([{ severity: 'medium', actor_type: 'anonymous', metadata: { method: 'password', ip_hash_prefix: expect.stringMatching(/^[0-9a-f]{12}$/), user_agent_hash_prefix: null } }]);
    expect(JSON.stringify(rows)).not.toContain(body.email.split('@')[0]);
    // the right password signs in as ever; an address without an account leaves no row
    await login({ email: body.email, password: body.password }, tenant.apiKey, randomIp()).expect(200);
    const before = await t.db.query(`SELECT 1 FROM audit_events WHERE tenant_id = $1 AND type = 'user.sign_in_failed'`, [tenant.id]);
    await login({ email: uniqueEmail('nobody'), password: 'wrong password!!' }, tenant.apiKey, randomIp()).expect(401);
    expect(await t.db.query(`SELECT 1 FROM audit_events WHERE tenant_id = $1 AND type = 'user.sign_in_failed'`, [tenant.id])).toHaveLength(before.length);
  });

  it("a wrong password from a live token's holder (a password change's current password, a step-up) is audited user.reauth_failed, the first of each failure window", async () => {
    const body = valid();
    const reg = (await register(body).expect(201)).body;
    const bearer = (path: string, payload: object) => t.http().post(path).set('Authorization', `Bearer ${reg.access_token}`).set('X-Forwarded-For', randomIp()).send(payload);
    await bearer('/v1/auth/password/change', { current_password: 'wrong password!!', new_password: 'another horse battery staple' }).expect(401);
    await bearer('/v1/auth/step-up/password', { password: 'wrong password again' }).expect(401);
    const rows = await t.db.query<{ severity: string; actor_type: string; actor_id: string; metadata: Record<string, unknown> }>(
      `SELECT severity, actor_type, actor_id, metadata FROM audit_events WHERE tenant_id = $1 AND type = 'user.reauth_failed' AND target_id = $2`,
      [tenant.id, reg.user.id],
    );
    expect(rows).toEqual([
      { severity: 'medium', actor_type: 'user', actor_id: reg.user.id, metadata: { method: 'password', flow: 'password_change', ip_hash_prefix: expect.stringMatching(/^[0-9a-f]{12}$/), user_agent_hash_prefix: null } },
    ]);
  });

  const statuses = (responses: { status: number }[]) => responses.reduce<Record<number, number>>((acc, r) => ({ ...acc, [r.status]: (acc[r.status] ?? 0) + 1 }), {});

  it('a burst of parallel wrong passwords from one address has at most 5 evaluated (each attempt is counted before it is checked)', async () => {
    const body = valid();
    await register(body).expect(201);
    const ip = randomIp();
    const burst = await Promise.all(Array.from({ length: 30 }, () => login({ email: body.email, password: 'wrong password!!' }, tenant.apiKey, ip)));
    expect(statuses(burst)).toEqual({ 401: 5, 429: 25 });
    expect(burst.filter((r) => r.status === 429).every((r) => r.body.code === 'auth/login_throttled' && Number(r.headers['retry-after']) > 0)).toBe(true);
    await login({ email: body.email, password: body.password }, tenant.apiKey, ip).expect(429);
  });

  it('a refusal caused only by attempts still being judged says to retry in a second, not after the window; judged failures block for the window', async () => {
    const throttle = t.app.get(LoginThrottleService);
    const realm = passwordSignInRealm(tenant.id);
    const account = uniqueEmail('pending');
    const ip = randomIp();
    const refusal = async () => {
      const e = await throttle.attempt(realm, account, ip).then(() => undefined, (err: unknown) => err);
      expect(e).toBeInstanceOf(RateLimitedError);
      return (e as RateLimitedError).retryAfterSeconds;
    };
    for (let i = 0; i < 5; i++) await throttle.attempt(realm, account, ip);
    expect(await refusal()).toBe(1); // five in flight: any of them may still be right
    await throttle.release(realm, account, ip); // one ended with nothing judged: its count goes
    await throttle.attempt(realm, account, ip); // so another may start
    for (let i = 0; i < 5; i++) await throttle.failed(realm, account, ip);
    expect(await refusal()).toBeGreaterThan(800); // five judged wrong: the pair is blocked for the window (900 s)
  });

  it('GET /me returns the user; a missing, tampered, foreign-audience, expired or unknown-kid token is 401 with WWW-Authenticate (no error code when no token was sent)', async () => {
    const body = valid();
    const reg = await register(body).expect(201);
    const me = await t.http().get('/v1/auth/me').set('Authorization', `Bearer ${reg.body.access_token}`).expect(200);
    expect(me.body).toMatchObject({ id: reg.body.user.id, email: body.email, email_verified: false, is_anonymous: false, role: 'member', created_at: reg.body.user.created_at, last_sign_in_at: expect.any(String) });

    const expect401 = async (auth?: string) => {
      const req = t.http().get('/v1/auth/me');
      if (auth) req.set('Authorization', auth);
      const res = await req.expect(401);
      expect(res.headers['www-authenticate']).toBe('Bearer error="invalid_token"');
      expect(res.headers['content-type']).toMatch(/problem\+json/);
    };
    // no credentials at all: the bare challenge, no error information (RFC 6750 section 3.1)
    const none = await t.http().get('/v1/auth/me').expect(401);
    expect(none.headers['www-authenticate']).toBe('Bearer realm="api"');
    expect(none.body).toMatchObject({ status: 401, code: 'auth/unauthorized' });
    // another scheme is no bearer credential at all: the bare challenge too (RFC 6750 section 3.1)
    for (const other of ['Basic abc', `Token ${reg.body.access_token}`]) {
      const res = await t.http().get('/v1/auth/me').set('Authorization', other).expect(401);
      expect(res.headers['www-authenticate']).toBe('Bearer realm="api"');
    }
    await expect401('Bearer');
    await expect401(`Bearer\t${reg.body.access_token}`);
    // the scheme name in any case, then one or more spaces (RFC 6750 section 2.1)
    for (const spelling of [`Bearer  ${reg.body.access_token}`, `bearer ${reg.body.access_token}`]) {
      await t.http().get('/v1/auth/me').set('Authorization', spelling).expect(200);
    }
    const [h, p, s] = reg.body.access_token.split('.');
    const claims = JSON.parse(Buffer.from(p, 'base64url').toString());
    await expect401(`Bearer ${h}.${Buffer.from(JSON.stringify({ ...claims, role: 'admin' })).toString('base64url')}.${s}`);
    const keys = t.app.get(SigningKeysService);
    const { kid, key } = keys.signingKey();
    // jsonwebtoken keeps the iat of the claims (noTimestamp would drop it)
    const forge = (c: object, k = kid, opts: jwt.SignOptions = {}) => jwt.sign(c, key, { algorithm: 'RS256', keyid: k, ...opts });
    const now = Math.floor(Date.now() / 1000);
    await expect401(`Bearer ${forge({ ...claims, aud: 'https://elsewhere.example' })}`);
    await expect401(`Bearer ${forge({ ...claims, iss: 'https://evil.example' })}`);
    await expect401(`Bearer ${forge({ ...claims, iat: now - 2000, exp: now - 1000 })}`);
    await expect401(`Bearer ${forge(claims, 'unknown-kid')}`);
    // signed with our own key, still refused: shapes no token of ours has (only a key holder can
    // sign them; refused before any query sees them, never a 5xx), an extension we do not know
    // (crit, RFC 7515 section 4.1.11), an iat beyond the clock skew
    const infinite = forge(claims).split('.');
    infinite[1] = Buffer.from(JSON.stringify(claims).replace(/"exp":\d+/, '"exp":1e309')).toString('base64url');
    const resigned = `${infinite[0]}.${infinite[1]}.${createSign('RSA-SHA256').update(`${infinite[0]}.${infinite[1]}`).sign(key).toString('base64url')}`;
    await expect401(`Bearer ${resigned}`);
    for (const bad of [{ sid: 'not-a-uuid' }, { tenant_id: 'x' }, { sub: 42 }, { iat: now + 3600 }, { act: { sub: 'agent' } }]) {
      await expect401(`Bearer ${forge({ ...claims, ...bad })}`);
    }
    for (const missing of ['jti', 'iat']) await expect401(`Bearer ${forge(Object.fromEntries(Object.entries(claims).filter(([k]) => k !== missing)), kid, { noTimestamp: true })}`);
    await expect401(`Bearer ${jwt.sign(claims, key, { algorithm: 'RS256', keyid: kid, header: { alg: 'RS256', kid, crit: ['exp'] } as never })}`);
    // the same claims as they were signed pass: the checks above fail for their own reason
    await t.http().get('/v1/auth/me').set('Authorization', `Bearer ${forge(claims)}`).expect(200);
    await expect401(`Bearer ${jwt.sign(claims, 'shared-secret', { algorithm: 'HS256', keyid: kid, noTimestamp: true })}`);
    // a published kid over a payload that is not JSON: bad input (401), never a 500
    const header = Buffer.from(JSON.stringify({ alg: 'RS256', typ: 'JWT', kid })).toString('base64url');
    for (const payload of ['hello', '{', '']) {
      const junk = `${header}.${Buffer.from(payload).toString('base64url')}.c2ln`;
      await expect401(`Bearer ${junk}`);
      for (const [method, path] of [['post', '/v1/auth/logout'], ['get', '/v1/users/me/agents'], ['post', '/v1/auth/mfa/totp/setup'], ['post', '/v1/auth/register']] as const) {
        const res = await t.http()[method](path).set('Authorization', `Bearer ${junk}`).set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', randomIp()).send({});
        expect([path, res.status]).toEqual([path, 401]);
      }
    }
    // a matching X-API-Key is fine; another tenant's key is 401 auth/tenant_mismatch
    await t.http().get('/v1/auth/me').set('Authorization', `Bearer ${reg.body.access_token}`).set('X-API-Key', tenant.apiKey).expect(200);
    const mismatch = await t.http().get('/v1/auth/me').set('Authorization', `Bearer ${reg.body.access_token}`).set('X-API-Key', other.apiKey).expect(401);
    expect(mismatch.body.code).toBe('auth/tenant_mismatch');
    expect(mismatch.headers['www-authenticate']).toBe('Bearer error="invalid_token", error_description="tenant_mismatch"');
  });

  it('RFC 9110 section 15.5.2: every 401 carries WWW-Authenticate, the challenge of the credential the route authenticates with (Bearer, ApiKey, the dashboard cookie)', async () => {
    const reg = await register(valid()).expect(201);
    const bearer = `Bearer ${reg.body.access_token}`;
    const ip = () => randomIp();
    const cases: [string, PromiseLike<{ status: number; body: { code?: string }; headers: Record<string, string> }>, string, string][] = [
      // a bearer route: its own token refused, no token, and the X-API-Key beside a valid token
      // refused as tenant_mismatch is (RFC 6750 section 3)
      ['me, no token', t.http().get('/v1/auth/me'), 'auth/unauthorized', 'Bearer realm="api"'],
      ['me, bad X-API-Key beside the token', t.http().get('/v1/auth/me').set('Authorization', bearer).set('X-API-Key', 'not-a-key'), 'auth/invalid_api_key', 'Bearer error="invalid_token", error_description="invalid_api_key"'],
      ['me, other tenant key', t.http().get('/v1/auth/me').set('Authorization', bearer).set('X-API-Key', other.apiKey), 'auth/tenant_mismatch', 'Bearer error="invalid_token", error_description="tenant_mismatch"'],
      ['logout, bad X-API-Key beside the token', t.http().post('/v1/auth/logout').set('Authorization', bearer).set('X-API-Key', 'not-a-key'), 'auth/invalid_api_key', 'Bearer error="invalid_token", error_description="invalid_api_key"'],
      // a bearer route refusing a password of the body: the route's bare challenge
      ['password change, wrong current password', t.http().post('/v1/auth/password/change').set('Authorization', bearer).set('X-Forwarded-For', ip()).send({ current_password: `${STRONG_PASSWORD}-wrong`, new_password: `${STRONG_PASSWORD}-new` }), 'auth/invalid_credentials', 'Bearer realm="api"'],
      // X-API-Key routes: a missing or bad key, and any credential of the body (password, refresh token, MFA challenge)
      ['anonymous, bad key', t.http().post('/v1/auth/anonymous').set('X-API-Key', 'not-a-key').set('X-Forwarded-For', ip()).send({}), 'auth/invalid_api_key', 'ApiKey realm="api"'],
      ['register, no key', t.http().post('/v1/auth/register').set('X-Forwarded-For', ip()).send(valid()), 'auth/invalid_api_key', 'ApiKey realm="api"'],
      ['login, bad key', login({ email: uniqueEmail(), password: STRONG_PASSWORD }, 'not-a-key'), 'auth/invalid_api_key', 'ApiKey realm="api"'],
      ['login, wrong password', login({ email: reg.body.user.email, password: `${STRONG_PASSWORD}-wrong` }), 'auth/invalid_credentials', 'ApiKey realm="api"'],
      ['refresh, no key', t.http().post('/v1/auth/refresh').send({ refresh_token: reg.body.refresh_token }), 'auth/invalid_api_key', 'ApiKey realm="api"'],
      ['refresh, dead refresh token', t.http().post('/v1/auth/refresh').set('X-API-Key', tenant.apiKey).send({ refresh_token: `00000000-0000-4000-8000-000000000000:${'a'.repeat(43)}` }), 'auth/invalid_refresh_token', 'ApiKey realm="api"'],
      ['MFA sign-in, unknown challenge', t.http().post('/v1/auth/mfa/verify').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', ip()).send({ mfa_challenge_token: 'unknown', code: '123456' }), 'mfa/invalid_challenge', 'ApiKey realm="api"'],
      // the dashboard: no session cookie, a wrong password at its sign-in
      ['dashboard me, no session', t.http().get('/v1/auth/dashboard/me'), 'auth/unauthorized', 'Cookie realm="dashboard"'],
      ['dashboard login, wrong password', t.http().post('/v1/auth/dashboard/login').set('X-Forwarded-For', ip()).send({ email: uniqueEmail(), password: STRONG_PASSWORD }), 'auth/invalid_credentials', 'Cookie realm="dashboard"'],
    ];
    for (const [name, answer, code, challenge] of cases) {
      const res = await answer;
      expect([name, res.status, res.body.code, res.headers['www-authenticate']]).toEqual([name, 401, code, challenge]);
    }
  });

  it('logout ends the session: its access token and refresh token stop working', async () => {
    const reg = await register(valid()).expect(201);
    await t.http().post('/v1/auth/logout').set('Authorization', `Bearer ${reg.body.access_token}`).expect(204);
    await t.http().get('/v1/auth/me').set('Authorization', `Bearer ${reg.body.access_token}`).expect(401);
    const r = await t.http().post('/v1/auth/refresh').set('X-API-Key', tenant.apiKey).send({ refresh_token: reg.body.refresh_token }).expect(401);
    expect(r.body.code).toBe('auth/invalid_refresh_token');
  });

  it('limits register to 5 per minute per client address (429 with Retry-After and X-Service-Docs)', async () => {
    const ip = randomIp();
    for (let i = 0; i < 5; i++) await register(valid(), tenant.apiKey, ip).expect(201);
    const res = await register(valid(), tenant.apiKey, ip).expect(429);
    expect(res.body.code).toBe('rate_limit/exceeded');
    expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
    expect(Number(res.headers['retry-after'])).toBeLessThanOrEqual(60);
    expect(res.headers['x-service-docs']).toMatch(/^http/);
    await register(valid(), tenant.apiKey, randomIp()).expect(201);
  });

  it('password sign-ins are limited per client address, successful ones included (RATE_LIMIT_LOGIN_PER_IP_PER_MIN, 60): one address cannot keep argon2 busy nor write sessions without end', async () => {
    const reg = await register(valid()).expect(201);
    const [{ email }] = await t.db.query<{ email: string }>(`SELECT email FROM users WHERE id = $1`, [reg.body.user.id]);
    const ip = randomIp();
    const sessionsBefore = Number((await t.db.query(`SELECT count(*) AS n FROM user_sessions WHERE user_id = $1`, [reg.body.user.id]))[0].n);
    // one after another (a parallel burst meets the failure throttle's pending rule first)
    for (let i = 0; i < 60; i++) await login({ email, password: STRONG_PASSWORD }, tenant.apiKey, ip).expect(200);
    const res = await login({ email, password: STRONG_PASSWORD }, tenant.apiKey, ip).expect(429);
    expect(res.body.code).toBe('rate_limit/exceeded');
    expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
    expect(Number(res.headers['retry-after'])).toBeLessThanOrEqual(60);
    expect(res.headers['x-service-docs']).toMatch(/^http/);
    // refused before the password is checked: no session written
    expect(Number((await t.db.query(`SELECT count(*) AS n FROM user_sessions WHERE user_id = $1`, [reg.body.user.id]))[0].n)).toBe(sessionsBefore + 60);
    await login({ email, password: STRONG_PASSWORD }, tenant.apiKey, randomIp()).expect(200);
  });

  it('the per-address limit holds for every spelling a proxy may forward: a port, brackets, and non-addresses sharing one budget', async () => {
    const ip = randomIp();
    for (let i = 0; i < 5; i++) await register(valid(), tenant.apiKey, ip).expect(201);
    for (const spelling of [`${ip}:443`, `[::ffff:${ip}]`, `[::ffff:${ip}]:8443`]) await register(valid(), tenant.apiKey, spelling).expect(429);
    // not addresses at all (a trailing dot, zero padding): one client between them, not one each
    const [a, b, c, d] = randomIp().split('.');
    const odd = [`${randomIp()}.`, `0${a}.${b}.${c}.${d}`, `${a}.0${b}.${c}.${d}`, `${randomIp()}.`, `${a}.${b}.0${c}.${d}`];
    const answers = [];
    for (const spelling of [...odd, `${randomIp()}.`]) answers.push((await register(valid(), tenant.apiKey, spelling)).status);
    expect(answers.filter((s) => s === 429).length).toBeGreaterThanOrEqual(1);
    expect(answers.at(-1)).toBe(429);
  });

  it('keys:rotate publishes a new key at once, signs with it only once cached JWKS have expired; tokens of the old key stay valid until they expire', async () => {
    const before = await register(valid()).expect(201);
    const oldKid = decodeProtectedHeader(before.body.access_token).kid;
    const keys = t.app.get(SigningKeysService);
    const { kid: newKid, activeFrom } = await keys.rotate();
    expect(activeFrom.getTime() - Date.now()).toBeGreaterThan(JWKS_MAX_AGE_SECONDS * 1000);
    const jwks = await t.http().get('/.well-known/jwks.json').expect(200);
    expect(jwks.headers['cache-control']).toBe(`public, max-age=${JWKS_MAX_AGE_SECONDS}`);
    expect(jwks.body.keys.map((k: { kid: string }) => k.kid)).toEqual(expect.arrayContaining([oldKid, newKid]));
    // published, not yet signing: a relying party with a JWKS cached just before knows every kid in use
    expect(decodeProtectedHeader((await register(valid()).expect(201)).body.access_token).kid).toBe(oldKid);
    // the publication lead has passed (the clock moved on): the new key signs, the old one is still published
    await t.db.query(`UPDATE signing_keys SET active_from = now() - interval '1 second' WHERE kid = $1`, [newKid]);
    await t.db.query(`UPDATE signing_keys SET retired_at = now() - interval '1 second' WHERE kid = $1`, [oldKid]);
    await keys.reload();
    const after = await register(valid()).expect(201);
    expect(decodeProtectedHeader(after.body.access_token).kid).toBe(newKid);
    expect((await t.http().get('/.well-known/jwks.json').expect(200)).body.keys.map((k: { kid: string }) => k.kid)).toEqual(expect.arrayContaining([oldKid, newKid]));
    await t.http().get('/v1/auth/me').set('Authorization', `Bearer ${before.body.access_token}`).expect(200);
    await t.http().get('/v1/auth/me').set('Authorization', `Bearer ${after.body.access_token}`).expect(200);
    // signing keys are stored with the private half encrypted
    const rows = await t.db.query<{ private_enc: string }>(`SELECT private_enc FROM signing_keys`);
    for (const r of rows) expect(r.private_enc).not.toContain('PRIVATE KEY');
  });

  it('a delayed rotation signs from the instant it announced, without waiting for the periodic reload', async () => {
    const keys = t.app.get(SigningKeysService);
    const { kid: newKid } = await keys.rotate();
    const oldKid = decodeProtectedHeader((await register(valid()).expect(201)).body.access_token).kid;
    expect(oldKid).not.toBe(newKid);
    // the periodic reload (every 30 s, at a phase this test does not know) is paused, so only the
    // switch's own timer can make the change below; the service's timer field stays set (the
    // service is running), and the app is closed after this describe's last test anyway
    clearInterval((keys as unknown as { timer?: NodeJS.Timeout }).timer);
    // the switch is 5 s ahead (as if the publication lead had nearly passed); one reload sees it
    const [{ at }] = await t.db.query<{ at: Date }>(`UPDATE signing_keys SET active_from = now() + interval '5 seconds' WHERE kid = $1 RETURNING active_from AS at`, [newKid]);
    await t.db.query(`UPDATE signing_keys SET retired_at = $2 WHERE kid = $1`, [oldKid, at]);
    await keys.reload();
    expect(decodeProtectedHeader((await register(valid()).expect(201)).body.access_token).kid).toBe(oldKid);
    // no reload is called: the service's own timer switches within moments of the instant
    while (keys.signingKey().kid !== newKid && Date.now() < at.getTime() + 10_000) await new Promise((r) => setTimeout(r, 50));
    expect(decodeProtectedHeader((await register(valid()).expect(201)).body.access_token).kid).toBe(newKid);
  });
});

describe('end users: the per-account failed sign-in limit under a parallel burst', () => {
  let t: TestApp;
  let tenant: TenantFixture;
  beforeAll(async () => {
    t = await createTestApp({ LOGIN_FAILURES_PER_ACCOUNT: '8' });
    tenant = await createTenant(t.db);
  });
  afterAll(() => t.close());

  it('holds against a burst from many addresses; successful sign-ins take their count back', async () => {
    const body = { email: uniqueEmail(), password: STRONG_PASSWORD, consent: true };
    await t.http().post('/v1/auth/register').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', randomIp()).send(body).expect(201);
    const signIn = (password: string) => t.http().post('/v1/auth/login').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', randomIp()).send({ email: body.email, password });
    // twelve successes in a row, from new addresses: none of them is left counted against the account
    for (let i = 0; i < 12; i++) await signIn(body.password).expect(200);
    const burst = await Promise.all(Array.from({ length: 20 }, () => signIn('wrong password!!')));
    expect(burst.filter((r) => r.status === 401)).toHaveLength(8);
    expect(burst.filter((r) => r.status === 429)).toHaveLength(12);
  });
});

// on a database of its own: withdrawing every older key would refuse the tokens of the test files
// running beside it on the run's shared database
describe('end users: withdrawing a compromised signing key', () => {
  let t: TestApp;
  let tenant: TenantFixture;
  beforeAll(async () => {
    t = await createIsolatedTestApp();
    tenant = await createTenant(t.db);
  });
  afterAll(() => t.close());

  it('keys:rotate --revoke-old (a compromised key): the new key signs at once, older keys leave the JWKS and their tokens are refused; refresh tokens go on', async () => {
    const before = await t.http().post('/v1/auth/register').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', randomIp()).send({ email: uniqueEmail(), password: STRONG_PASSWORD, consent: true }).expect(201);
    const oldKid = decodeProtectedHeader(before.body.access_token).kid;
    // in use just before the withdrawal: verified, and that verification kept a while
    await t.http().get('/v1/auth/me').set('Authorization', `Bearer ${before.body.access_token}`).expect(200);
    const keys = t.app.get(SigningKeysService);
    const { kid: newKid, revoked } = await keys.rotate({ revokeOld: true });
    expect(revoked).toContain(oldKid);
    const published = (await t.http().get('/.well-known/jwks.json').expect(200)).body.keys.map((k: { kid: string }) => k.kid);
    expect(published).toEqual([newKid]);
    await t.http().get('/v1/auth/me').set('Authorization', `Bearer ${before.body.access_token}`).expect(401);
    const refreshed = await t.http().post('/v1/auth/refresh').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', randomIp()).send({ refresh_token: before.body.refresh_token }).expect(200);
    expect(decodeProtectedHeader(refreshed.body.access_token).kid).toBe(newKid);
    await t.http().get('/v1/auth/me').set('Authorization', `Bearer ${refreshed.body.access_token}`).expect(200);
    // a reload (on an announcement, or every 30 s) does not bring the withdrawn key back
    await keys.reload();
    await t.http().get('/v1/auth/me').set('Authorization', `Bearer ${before.body.access_token}`).expect(401);
  });

  it('a rotation made by another process (the CLI) is announced: this process stops trusting and signing with the withdrawn key at once, not at its next 30 s reload', async () => {
    const register = () => t.http().post('/v1/auth/register').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', randomIp()).send({ email: uniqueEmail(), password: STRONG_PASSWORD, consent: true }).expect(201);
    const keys = t.app.get(SigningKeysService);
    await keys.reload();
    const before = await register();
    const oldKid = decodeProtectedHeader(before.body.access_token).kid;
    // in use just before: this process has verified it (and keeps the verification a while)
    await t.http().get('/v1/auth/me').set('Authorization', `Bearer ${before.body.access_token}`).expect(200);
    // the CLI's process: its own key service on the same database and Redis
    const cli = new SigningKeysService(t.app.get(Db), t.app.get(EnvelopeCipher), t.app.get(APP_CONFIG), t.app.get(REDIS), t.app.get(EventsService));
    const { kid: newKid } = await cli.rotate({ revokeOld: true });
    const deadline = Date.now() + 3000;
    while ((await t.http().get('/v1/auth/me').set('Authorization', `Bearer ${before.body.access_token}`)).status !== 401) {
      if (Date.now() > deadline) throw new Error('the withdrawn key is still trusted 3 s after the rotation');
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(decodeProtectedHeader((await register()).body.access_token).kid).toBe(newKid);
    expect(newKid).not.toBe(oldKid);
    // audited, the withdrawn keys named: the operator's response to a key compromise leaves a trail
    const [audit] = await t.db.query<{ severity: string; actor_type: string; metadata: { revoked_kids: string[]; immediate: boolean } }>(
      `SELECT severity, actor_type, metadata FROM audit_events WHERE type = 'signing_key.revoked' AND target_id = $1`,
      [newKid],
    );
    expect(audit).toMatchObject({ severity: 'high', actor_type: 'system', metadata: { immediate: true } });
    expect(audit.metadata.revoked_kids).toContain(oldKid);
    // a planned rotation too, at a lower severity
    const { kid: planned } = await cli.rotate();
    expect(await t.db.query(`SELECT severity FROM audit_events WHERE type = 'signing_key.rotated' AND target_id = $1`, [planned])).toEqual([{ severity: 'medium' }]);
  });
});
