import { EmailNfkcSpelling1765200000000 } from '../../../migrations/1765200000000-email-nfkc-spelling';
import { EmailDomainCase1765300000000 } from '../../../migrations/1765300000000-email-domain-case';
import { createDataSource } from '../../../src/shared/db/data-source';
import { createTenant, TenantFixture } from '../../factories/tenant.factory';
import { createIsolatedTestApp } from '../../setup/isolated-db';
import { randomIp, STRONG_PASSWORD } from '../../setup/app';

const fullwidth = (s: string) => [...s].map((c) => (/[a-z0-9]/.test(c) ? String.fromCharCode(c.charCodeAt(0) + 0xfee0) : c)).join('');

/**
 * An address is stored and mailed in NFKC (mailboxSpelling): an account created with a
 * compatibility spelling of someone's address is that address's account, and its mail reaches that
 * mailbox, so the owner can take it over by a reset (the pre-hijack remedy). On a database of its
 * own: the migration test rewrites every row of its database.
 */
describe('email spelling: an account is mailed at the mailbox its key names', () => {
  let t: Awaited<ReturnType<typeof createIsolatedTestApp>>;
  let tenant: TenantFixture;
  beforeAll(async () => {
    t = await createIsolatedTestApp();
    tenant = await createTenant(t.db);
  });
  afterAll(() => t.close());

  const post = (path: string, body: object) => t.http().post(path).set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', randomIp()).send(body);
  const mailsTo = async (template: string, userOrAddress: string) =>
    (await t.db.query<{ to: string }>(`SELECT payload->>'to' AS to FROM outbox WHERE topic = 'email' AND payload->>'template' = $1 AND payload->>'to' ILIKE $2`, [template, `%${userOrAddress.split('@')[0].slice(-8)}%`])).map((r) => r.to);

  it("a squatter's fullwidth spelling of the owner's address: the account is stored and mailed at the owner's address, and the owner's reset reaches them", async () => {
    const owner = `victim.${Math.random().toString(36).slice(2, 10)}@example.com`;
    const squat = await post('/v1/auth/register', { email: fullwidth(owner.split('@')[0]) + '@example.com', password: STRONG_PASSWORD, consent: true }).expect(201);
    expect(squat.body.user.email).toBe(owner);
    const [row] = await t.db.query<{ email: string }>(`SELECT email FROM users WHERE id = $1`, [squat.body.user.id]);
    expect(row.email).toBe(owner);
    // the verification mail (which warns whoever did not register) goes to the owner's mailbox
    expect(await mailsTo('email_verification', owner)).toEqual([owner]);
    expect((await post('/v1/auth/register', { email: owner, password: STRONG_PASSWORD, consent: true }).expect(409)).body.code).toBe('user/email_exists');
    await post('/v1/auth/password/forgot', { email: owner }).expect(202);
    expect(await mailsTo('password_reset', owner)).toEqual([owner]);
  });

  it('a code asked for a compatibility spelling of an address without an account is mailed at its NFKC spelling', async () => {
    const local = `new.${Math.random().toString(36).slice(2, 10)}`;
    await t.db.query(`UPDATE tenants SET email_otp_enabled = true WHERE id = $1`, [tenant.id]);
    await t.tenantChanged(tenant.id);
    await post('/v1/auth/email-otp', { email: `${fullwidth(local)}@example.com`, mode: 'login_or_create' }).expect((r) => expect(r.status).toBeLessThan(300));
    expect(await mailsTo('email_otp', `${local}@example.com`)).toEqual([`${local}@example.com`]);
  });

  it('an address whose NFKC form is no address (a fullwidth @ in the local part) is refused', async () => {
    const res = await post('/v1/auth/register', { email: `a\uff20b.${Date.now()}@example.com`, password: STRONG_PASSWORD, consent: true }).expect(400);
    expect(res.body.errors.map((e: { field: string }) => e.field)).toContain('email');
  });

  it("a domain that lower-casing takes to another name (capital ẞ) is refused everywhere: its key would name business.com while its mail went to busineß.com", async () => {
    const local = `kim.${Date.now()}`;
    await t.db.query(`UPDATE tenants SET email_otp_enabled = true, magic_link_enabled = true WHERE id = $1`, [tenant.id]);
    await t.tenantChanged(tenant.id);
    for (const [path, body] of [
      ['/v1/auth/register', { email: `${local}@busine\u1e9e.com`, password: STRONG_PASSWORD, consent: true }],
      ['/v1/auth/email-otp', { email: `${local}@busine\u1e9e.com`, mode: 'login_or_create' }],
      ['/v1/auth/magic-link', { email: `${local}@busine\u1e9e.com` }],
      ['/v1/auth/register', { email: `"${local}@evil.example"@business.com`, password: STRONG_PASSWORD, consent: true }],
    ] as const) {
      const res = await post(path, body).expect(400);
      expect(res.body.errors.map((e: { field: string }) => e.field)).toEqual(['email']);
    }
    expect(await mailsTo('email_otp', `${local}@x`)).toEqual([]);
    // the owner of business.com registers; the small ß is another domain, another account
    await post('/v1/auth/register', { email: `${local}@business.com`, password: STRONG_PASSWORD, consent: true }).expect(201);
    await post('/v1/auth/register', { email: `${local}@busine\u00dfe.com`, password: STRONG_PASSWORD, consent: true }).expect(201);
  });

  it('the migration gives a stored spelling whose domain lower-cases to another name the domain its key names (keys unchanged)', async () => {
    const other = await createTenant(t.db);
    const insert = (email: string, key: string) =>
      t.db.query<{ id: string }>(`INSERT INTO users (tenant_id, email, email_normalized) VALUES ($1, $2, $3) RETURNING id`, [other.id, email, key]);
    const [sharp] = await insert('Kim@Busine\u1e9e.com', 'kim@business.com');
    const [small] = await insert('Kim@Busine\u00df.com', 'kim@busine\u00df.com');
    const [sigma] = await insert('x@mail.\u0392\u0391\u03a3', 'x@mail.\u03b2\u03b1\u03c3');
    const ds = createDataSource({ DATABASE_URL: t.databaseUrl, DATABASE_POOL_SIZE: 2 });
    await ds.initialize();
    const runner = ds.createQueryRunner();
    try {
      await new EmailDomainCase1765300000000().up(runner);
    } finally {
      await runner.release();
      await ds.destroy();
    }
    const rows = Object.fromEntries((await t.db.query<{ id: string; email: string; email_normalized: string }>(`SELECT id, email, email_normalized FROM users WHERE id = ANY($1)`, [[sharp.id, small.id, sigma.id]])).map((r) => [r.id, [r.email, r.email_normalized]]));
    expect(rows).toEqual({
      [sharp.id]: ['Kim@business.com', 'kim@business.com'],
      [small.id]: ['Kim@Busine\u00df.com', 'kim@busine\u00df.com'],
      [sigma.id]: ['x@mail.\u03b2\u03b1\u03c3', 'x@mail.\u03b2\u03b1\u03c3'],
    });
  });

  it('the migration rewrites stored spellings to NFKC (keys unchanged); one whose NFKC form would not be an address is left', async () => {
    const other = await createTenant(t.db);
    const insert = (email: string, key: string) =>
      t.db.query<{ id: string }>(`INSERT INTO users (tenant_id, email, email_normalized) VALUES ($1, $2, $3) RETURNING id`, [other.id, email, key]);
    const [squat] = await insert(`${fullwidth('owner')}@example.com`, 'owner@example.com');
    const [ascii] = await insert('Plain@Example.com', 'plain@example.com');
    const [odd] = await insert('a\uff20b@example.com', 'a@b@example.com');
    // a pair an earlier migration left with its old keys for an operator: the spellings that tell them apart stay
    const [left1] = await insert(`${fullwidth('bob')}@example.com`, `${fullwidth('bob')}@example.com`);
    const [left2] = await insert(`${fullwidth('b')}ob@example.com`, `${fullwidth('b')}ob@example.com`);
    const [dash] = await t.db.query<{ id: string }>(`INSERT INTO dashboard_users (email, email_normalized, password_hash) VALUES ($1, 'admin.m@example.com', 'x') RETURNING id`, [`${fullwidth('admin')}.m@example.com`]);
    const ds = createDataSource({ DATABASE_URL: t.databaseUrl, DATABASE_POOL_SIZE: 2 });
    await ds.initialize();
    const runner = ds.createQueryRunner();
    try {
      await new EmailNfkcSpelling1765200000000().up(runner);
    } finally {
      await runner.release();
      await ds.destroy();
    }
    const rows = Object.fromEntries(
      (await t.db.query<{ id: string; email: string; email_normalized: string }>(`SELECT id, email, email_normalized FROM users WHERE id = ANY($1)`, [[squat.id, ascii.id, odd.id, left1.id, left2.id]])).map((r) => [r.id, [r.email, r.email_normalized]]),
    );
    expect(rows).toEqual({
      [squat.id]: ['owner@example.com', 'owner@example.com'],
      [ascii.id]: ['Plain@Example.com', 'plain@example.com'],
      [odd.id]: ['a\uff20b@example.com', 'a@b@example.com'],
      [left1.id]: [`${fullwidth('bob')}@example.com`, `${fullwidth('bob')}@example.com`],
      [left2.id]: [`${fullwidth('b')}ob@example.com`, `${fullwidth('b')}ob@example.com`],
    });
    const [d] = await t.db.query<{ email: string }>(`SELECT email FROM dashboard_users WHERE id = $1`, [dash.id]);
    expect(d.email).toBe('admin.m@example.com');
  });
});
