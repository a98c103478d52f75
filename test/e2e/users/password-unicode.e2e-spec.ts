import { randomUUID } from 'crypto';
import { createTenant, TenantFixture } from '../../factories/tenant.factory';
import { createTestApp, randomIp, STRONG_PASSWORD, TestApp, uniqueEmail } from '../../setup/app';
import { PasswordHasher } from '../../../src/shared/crypto/password-hasher';

const NFC = 'correct h\u00f6rse battery staple';
const NFD = 'correct ho\u0308rse battery staple';
/** six é written decomposed: 12 code points as typed, 6 in NFKC (the form that is hashed) */
const SIX_DECOMPOSED = 'e\u0301'.repeat(6);
/** 18 code points as typed, 12 in NFKC: the minimum length, counted on what is hashed */
const MIN_DECOMPOSED = SIX_DECOMPOSED + 'p'.repeat(6);
const MIN_COMPOSED = '\u00e9'.repeat(6) + 'p'.repeat(6);
/** 129 code points as typed, 128 in NFKC: the maximum length, counted on what is hashed */
const MAX_DECOMPOSED = 'e\u0301' + 'p'.repeat(127);
const MAX_COMPOSED = '\u00e9' + 'p'.repeat(127);

/**
 * Passwords are compared in Unicode NFKC (NIST SP 800-63B 5.1.1.2): a password set on a device
 * that composes characters is the same password typed on one that decomposes them. Hashes made
 * before (of the form as typed) still match that form, and the sign-in re-hashes them.
 */
describe('passwords: one password whatever the Unicode spelling', () => {
  let t: TestApp;
  let tenant: TenantFixture;
  beforeAll(async () => {
    t = await createTestApp();
    tenant = await createTenant(t.db);
  });
  afterAll(() => t.close());

  const post = (path: string, body: object) => t.http().post(path).set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', randomIp()).send(body);

  it('end users: registered composed, signed in decomposed (and the other way)', async () => {
    const a = uniqueEmail('nfc');
    await post('/v1/auth/register', { email: a, password: NFC, consent: true }).expect(201);
    await post('/v1/auth/login', { email: a, password: NFD }).expect(200);
    const b = uniqueEmail('nfd');
    await post('/v1/auth/register', { email: b, password: NFD, consent: true }).expect(201);
    await post('/v1/auth/login', { email: b, password: NFC }).expect(200);
    expect((await post('/v1/auth/login', { email: b, password: 'correct horse battery staple' }).expect(401)).body.code).toBe('auth/invalid_credentials');
  });

  it('a hash stored before normalization: the typed form signs in and the hash is replaced by one of the normalized form', async () => {
    const email = uniqueEmail('legacy');
    const reg = await post('/v1/auth/register', { email, password: NFD, consent: true }).expect(201);
    // as stored by the previous release: argon2id of the decomposed form as typed
    const argon2 = await import('argon2');
    const legacy = await argon2.hash(NFD, { type: argon2.argon2id, memoryCost: 1024, timeCost: 1, parallelism: 1 });
    await t.db.query(`UPDATE users SET password_hash = $2 WHERE id = $1`, [reg.body.user.id, legacy]);
    await post('/v1/auth/login', { email, password: NFD }).expect(200);
    const [row] = await t.db.query<{ password_hash: string }>(`SELECT password_hash FROM users WHERE id = $1`, [reg.body.user.id]);
    expect(row.password_hash).not.toBe(legacy);
    await post('/v1/auth/login', { email, password: NFC }).expect(200);
  });

  it('dashboard: signed up composed, signed in decomposed', async () => {
    const email = uniqueEmail('owner-nfc');
    await t
      .http()
      .post('/v1/onboarding/signup')
      .set('X-Forwarded-For', randomIp())
      .send({ email, password: NFC, tenant_name: `Acme ${randomUUID().slice(0, 6)}`, consent_terms: true, consent_privacy: true })
      .expect(201);
    await t.http().post('/v1/auth/dashboard/login').set('X-Forwarded-For', randomIp()).send({ email, password: NFD }).expect(200);
  });

  describe('password length is counted on the NFKC form (what is hashed), not as typed', () => {
    const signup = (email: string, password: string) =>
      t
        .http()
        .post('/v1/onboarding/signup')
        .set('X-Forwarded-For', randomIp())
        .send({ email, password, tenant_name: `Acme ${randomUUID().slice(0, 6)}`, consent_terms: true, consent_privacy: true });
    const dashboardLogin = (email: string, password: string) => t.http().post('/v1/auth/dashboard/login').set('X-Forwarded-For', randomIp()).send({ email, password });
    const refusedPassword = (res: { body: { code: string; errors: { field: string }[] } }) => {
      expect(res.body.code).toBe('request/invalid');
      expect(res.body.errors.map((e) => e.field)).toContain('password');
    };

    it('end users: twelve code points that hash as six are too short (400); nothing is created', async () => {
      expect([...SIX_DECOMPOSED].length).toBe(12);
      const email = uniqueEmail('short-nfd');
      refusedPassword(await post('/v1/auth/register', { email, password: SIX_DECOMPOSED, consent: true }).expect(400));
      const [{ n }] = await t.db.query<{ n: string }>(`SELECT count(*) AS n FROM users WHERE email = $1`, [email]);
      expect(Number(n)).toBe(0);
    });

    it('end users: 12 code points after NFKC (18 as typed) registers, and the composed form (12 as typed) signs in', async () => {
      const email = uniqueEmail('min-nfd');
      await post('/v1/auth/register', { email, password: MIN_DECOMPOSED, consent: true }).expect(201);
      await post('/v1/auth/login', { email, password: MIN_COMPOSED }).expect(200);
      await post('/v1/auth/login', { email, password: MIN_DECOMPOSED }).expect(200);
    });

    it('end users: 129 code points as typed, 128 after NFKC, registers and signs in, either form', async () => {
      expect([...MAX_DECOMPOSED].length).toBe(129);
      const email = uniqueEmail('max-nfd');
      await post('/v1/auth/register', { email, password: MAX_DECOMPOSED, consent: true }).expect(201);
      await post('/v1/auth/login', { email, password: MAX_DECOMPOSED }).expect(200);
      await post('/v1/auth/login', { email, password: MAX_COMPOSED }).expect(200);
      // registered composed, signed in decomposed
      const other = uniqueEmail('max-nfc');
      await post('/v1/auth/register', { email: other, password: MAX_COMPOSED, consent: true }).expect(201);
      await post('/v1/auth/login', { email: other, password: MAX_DECOMPOSED }).expect(200);
    });

    it('end users: an account whose password was set before this count (six decomposed letters) still signs in as typed', async () => {
      const email = uniqueEmail('bug-era');
      const reg = await post('/v1/auth/register', { email, password: STRONG_PASSWORD, consent: true }).expect(201);
      // as a registration with the count as typed stored it: the hash of the six-letter NFKC form
      await t.db.query(`UPDATE users SET password_hash = $2 WHERE id = $1`, [reg.body.user.id, await t.app.get(PasswordHasher).hash(SIX_DECOMPOSED)]);
      await post('/v1/auth/login', { email, password: SIX_DECOMPOSED }).expect(200);
    });

    it('dashboard signup: the same count (400 for six decomposed letters; 12 and 128 after NFKC sign up and sign in)', async () => {
      refusedPassword(await signup(uniqueEmail('owner-short'), SIX_DECOMPOSED).expect(400));
      const min = uniqueEmail('owner-min');
      await signup(min, MIN_DECOMPOSED).expect(201);
      await dashboardLogin(min, MIN_COMPOSED).expect(200);
      const max = uniqueEmail('owner-max');
      await signup(max, MAX_DECOMPOSED).expect(201);
      await dashboardLogin(max, MAX_DECOMPOSED).expect(200);
      await dashboardLogin(max, MAX_COMPOSED).expect(200);
    });
  });
});
