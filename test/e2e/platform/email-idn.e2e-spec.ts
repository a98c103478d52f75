import { EmailIdn1765100000000 } from '../../../migrations/1765100000000-email-idn';
import { createDataSource } from '../../../src/shared/db/data-source';
import { createApiKey, signupTenant } from '../../factories/dashboard.factory';
import { createTenant } from '../../factories/tenant.factory';
import { createIsolatedTestApp } from '../../setup/isolated-db';
import { randomIp, STRONG_PASSWORD } from '../../setup/app';

/**
 * An internationalized email domain is one domain in its A-label (`xn--bcher-kva.de`) and U-label
 * (`bücher.de`) spellings: one account per mailbox, and the tenant's domain lists apply to both.
 * On a database of its own: the migration test rewrites every key of its database.
 */
describe('internationalized email domains: one address in either IDNA spelling', () => {
  let t: Awaited<ReturnType<typeof createIsolatedTestApp>>;
  beforeAll(async () => {
    t = await createIsolatedTestApp();
  });
  afterAll(() => t.close());

  const tag = () => Math.random().toString(36).slice(2, 8);

  it('registering the A-label spelling of an address that has an account is 409 user/email_exists', async () => {
    const tenant = await createTenant(t.db);
    const register = (email: string) => t.http().post('/v1/auth/register').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', randomIp()).send({ email, password: STRONG_PASSWORD, consent: true });
    const local = `dup.${tag()}`;
    await register(`${local}@b\u00fccher.example`).expect(201);
    expect((await register(`${local}@XN--BCHER-KVA.example`).expect(409)).body.code).toBe('user/email_exists');
    // and the other way round; sign-in finds the account by either spelling
    const other = `other.${tag()}`;
    await register(`${other}@xn--mnchen-3ya.example`).expect(201);
    expect((await register(`${other}@m\u00fcnchen.example`).expect(409)).body.code).toBe('user/email_exists');
    await t.http().post('/v1/auth/login').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', randomIp()).send({ email: `${other}@M\u00dcNCHEN.example`, password: STRONG_PASSWORD }).expect(200);
  });

  it("the tenant's domain lists apply to both spellings, entries stored in the Unicode form", async () => {
    const d = await signupTenant(t);
    const { key } = await createApiKey(t, d);
    const put = await t.http().put(`/v1/auth/dashboard/tenants/${d.slug}/settings/email-domains`).set('Cookie', d.cookie).set('X-CSRF-Token', d.csrf)
      .send({ blocklist: ['m\u00fcnchen.example', 'xn--bcher-kva.example'] }).expect(200);
    expect(put.body.blocklist).toEqual(['m\u00fcnchen.example', 'b\u00fccher.example']);
    const register = (email: string) => t.http().post('/v1/auth/register').set('X-API-Key', key).set('X-Forwarded-For', randomIp()).send({ email, password: STRONG_PASSWORD, consent: true });
    for (const email of [`a.${tag()}@xn--mnchen-3ya.example`, `b.${tag()}@m\u00fcnchen.example`, `c.${tag()}@b\u00fccher.example`, `d.${tag()}@xn--bcher-kva.example`]) {
      expect([email, (await register(email).expect(422)).body.code]).toEqual([email, 'email/domain_blocked']);
    }
    // an entry stored in the A-label form before entries were kept in the Unicode form still applies
    await t.db.query(`UPDATE tenants SET email_blocklist = ARRAY['xn--caf-dma.example'], email_allowlist = '{}' WHERE id = $1`, [d.tenantId]);
    await t.tenantChanged(d.tenantId);
    expect((await register(`e.${tag()}@caf\u00e9.example`).expect(422)).body.code).toBe('email/domain_blocked');
  });

  it('a list entry keeps the final sigma of its domain (βας.gr and βασ.gr are two DNS names), whatever way it is typed; one not stable in any case is refused', async () => {
    const d = await signupTenant(t);
    const { key } = await createApiKey(t, d);
    const put = (body: object) => t.http().put(`/v1/auth/dashboard/tenants/${d.slug}/settings/email-domains`).set('Cookie', d.cookie).set('X-CSRF-Token', d.csrf).send(body);
    const register = (email: string) => t.http().post('/v1/auth/register').set('X-API-Key', key).set('X-Forwarded-For', randomIp()).send({ email, password: STRONG_PASSWORD, consent: true });
    for (const entry of ['\u03b2\u03b1\u03c2.example', '@\u03b2\u03b1\u03c2.example', 'xn--mxab3c.example', '\u0392\u0391\u03c2.example']) {
      expect([entry, (await put({ blocklist: [entry] }).expect(200)).body.blocklist]).toEqual([entry, ['\u03b2\u03b1\u03c2.example']]);
    }
    expect((await register(`a.${tag()}@\u03b2\u03b1\u03c2.example`).expect(422)).body.code).toBe('email/domain_blocked');
    await register(`b.${tag()}@\u03b2\u03b1\u03c3.example`).expect(201);
    await put({ blocklist: [], allowlist: ['\u03b2\u03b1\u03c2.example'] }).expect(200);
    await register(`c.${tag()}@\u03b2\u03b1\u03c2.example`).expect(201);
    expect((await register(`d.${tag()}@\u03b2\u03b1\u03c3.example`).expect(422)).body.code).toBe('email/domain_not_allowed');
    // as for an address's domain: a capital ẞ (IDNA: ss, toLowerCase: ß) or a capital Σ ending a label (σ, ς) is refused
    for (const entry of ['STRA\u1e9eE.example', 'mail.\u0392\u0391\u03a3']) {
      expect([entry, (await put({ blocklist: [entry] }).expect(400)).body.errors]).toEqual([entry, [{ field: 'blocklist.0', message: 'blocklist entries must be domain names' }]]);
    }
    expect((await put({ blocklist: ['stra\u00dfe.example', '\u03b2\u03b1\u03c3.example'] }).expect(200)).body.blocklist).toEqual(['stra\u00dfe.example', '\u03b2\u03b1\u03c3.example']);
  });

  it('the migration rewrites stored keys to the Unicode form; a pair that would collide keeps its keys', async () => {
    const tenant = await createTenant(t.db);
    const insert = (email: string, key: string) =>
      t.db.query<{ id: string }>(`INSERT INTO users (tenant_id, email, email_normalized) VALUES ($1, $2, $3) RETURNING id`, [tenant.id, email, key]);
    const [solo] = await insert('Solo@XN--MNCHEN-3YA.example', 'solo@xn--mnchen-3ya.example');
    // two accounts the previous key told apart: a migration cannot merge them
    const [u1] = await insert('pair@b\u00fccher.example', 'pair@b\u00fccher.example');
    const [u2] = await insert('pair@xn--bcher-kva.example', 'pair@xn--bcher-kva.example');
    const ds = createDataSource({ DATABASE_URL: t.databaseUrl, DATABASE_POOL_SIZE: 2 });
    await ds.initialize();
    const runner = ds.createQueryRunner();
    try {
      await new EmailIdn1765100000000().up(runner);
    } finally {
      await runner.release();
      await ds.destroy();
    }
    const keys = Object.fromEntries(
      (await t.db.query<{ id: string; email_normalized: string }>(`SELECT id, email_normalized FROM users WHERE id = ANY($1)`, [[solo.id, u1.id, u2.id]])).map((r) => [r.id, r.email_normalized]),
    );
    expect(keys).toEqual({ [solo.id]: 'solo@m\u00fcnchen.example', [u1.id]: 'pair@b\u00fccher.example', [u2.id]: 'pair@xn--bcher-kva.example' });
  });
});
