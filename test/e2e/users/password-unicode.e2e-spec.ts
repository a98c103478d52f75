import { randomUUID } from 'crypto';
import { createTenant, TenantFixture } from '../../factories/tenant.factory';
import { createTestApp, randomIp, TestApp, uniqueEmail } from '../../setup/app';

const NFC = 'correct h\u00f6rse battery staple';
const NFD = 'correct ho\u0308rse battery staple';

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
});
