import { createHash } from 'crypto';
import { DashboardInvitePending1765360000000 } from '../../../migrations/1765360000000-dashboard-invite-pending';
import { createDataSource } from '../../../src/shared/db/data-source';
import { DashboardFixture, signupTenant } from '../../factories/dashboard.factory';
import { createTenant } from '../../factories/tenant.factory';
import { randomIp, STRONG_PASSWORD, TestApp, uniqueEmail } from '../../setup/app';
import { createIsolatedTestApp } from '../../setup/isolated-db';
import { gateWrites } from '../../setup/hold-writes';
import { linkToken, MailWorld, startMailWorld } from '../account-security/account-security.helpers';

const sha256Hex = (s: string) => createHash('sha256').update(s).digest('hex');

/**
 * Invitations cannot be used to mail an address without end: one pending invitation per (tenant,
 * address), re-inviting replaces it; invitation mails limited per address (all tenants together)
 * and per tenant. Mail goes through the real outbox, worker and an SMTP capture server.
 */
describe('dashboard invitations: one pending invitation per address, mail limits', () => {
  let w: MailWorld;
  let t: TestApp;
  beforeAll(async () => {
    w = await startMailWorld();
    t = w.t;
  }, 60_000);
  afterAll(() => w.close());

  const invite = (app: TestApp, d: DashboardFixture, email: string, role: 'owner' | 'member' = 'member') =>
    app.http().post(`/v1/auth/dashboard/tenants/${d.slug}/members`).set('Cookie', d.cookie).set('X-CSRF-Token', d.csrf).send({ email, role });
  const accept = (token: string, password = STRONG_PASSWORD) => t.http().post('/v1/auth/dashboard/invites/accept').set('X-Forwarded-For', randomIp()).send({ token, password });
  /** invitation mails queued for an address key (any spelling): one outbox row per mail */
  const queuedMails = async (emailKey: string) =>
    Number((await t.db.query<{ n: string }>(`SELECT count(*) AS n FROM outbox WHERE topic = 'email' AND payload->>'template' = 'dashboard_invite' AND lower(payload->>'to') = $1`, [emailKey]))[0].n);
  const pendingRows = (tenantId: string, emailKey: string) =>
    t.db.query<{ id: string; role: string; token_hash: string; email: string }>(
      `SELECT id, role, token_hash, email FROM dashboard_invites WHERE tenant_id = $1 AND email_normalized = $2 AND accepted_at IS NULL`,
      [tenantId, emailKey],
    );

  it('re-inviting an address replaces its pending invitation: one pending row, one mail per call, the earlier token refused, the latest role applies', async () => {
    const owner = await signupTenant(w.t);
    const email = uniqueEmail('reinvited');
    const first = await invite(t, owner, email, 'member').expect(201);
    const firstRow = await pendingRows(owner.tenantId, email);
    // another spelling of the same address is the same invitation
    const second = await invite(t, owner, email.toUpperCase(), 'owner').expect(201);
    expect(second.body.invite_token).not.toBe(first.body.invite_token);

    const rows = await pendingRows(owner.tenantId, email);
    expect(rows).toEqual([{ id: firstRow[0].id, role: 'owner', token_hash: sha256Hex(second.body.invite_token), email: email.toUpperCase() }]);
    expect(await t.db.query(`SELECT 1 FROM dashboard_invites WHERE tenant_id = $1 AND email_normalized = $2`, [owner.tenantId, email])).toHaveLength(1);

    // one mail per invitation call, each with its own token
    expect(await queuedMails(email)).toBe(2);
    const mails = await w.smtp.waitForCount((m) => m.to.map((x) => x.toLowerCase()).includes(email), 2);
    expect(mails).toHaveLength(2);
    const mailed = mails.map((m) => linkToken(m, '/dashboard/invites/accept'));
    expect(mailed.sort()).toEqual([first.body.invite_token, second.body.invite_token].sort());

    // the earlier token no longer works; the latest one does, with the latest role
    expect((await accept(first.body.invite_token).expect(400)).body.code).toBe('invite/invalid');
    const joined = await accept(second.body.invite_token).expect(200);
    expect(joined.body.memberships).toEqual([{ tenant_id: owner.tenantId, tenant_slug: owner.slug, role: 'owner' }]);
    expect((await accept(first.body.invite_token).expect(400)).body.code).toBe('invite/invalid');

    const audits = await t.db.query<{ metadata: { role: string; replaced_pending: boolean }; target_id: string }>(
      `SELECT metadata, target_id FROM audit_events WHERE tenant_id = $1 AND type = 'dashboard.member_invited' ORDER BY created_at, metadata->>'replaced_pending'`,
      [owner.tenantId],
    );
    expect(audits).toEqual([
      { metadata: { role: 'member', replaced_pending: false }, target_id: firstRow[0].id },
      { metadata: { role: 'owner', replaced_pending: true }, target_id: firstRow[0].id },
    ]);
  });

  it('a re-invitation sent while the earlier invitation is being accepted is 409 member/exists: no pending invitation is left for the new member to rejoin with after a removal', async () => {
    const owner = await signupTenant(t);
    const x = await signupTenant(t); // an existing dashboard account (its own tenant)
    const first = await invite(t, owner, x.email).expect(201);
    // the acceptance stops inside its transaction: invitation row marked accepted, membership not yet written
    const gate = await gateWrites(t.db, 'tenant_members', 'INSERT', `NEW.user_id = '${x.userId}' AND NEW.tenant_id = '${owner.tenantId}'`);
    let accepted, reinvited;
    try {
      const acceptP = accept(first.body.invite_token).then((r) => r);
      const pid = await gate.reached();
      // "resend" meanwhile: no member yet at its first check, then it waits on the invitation row
      const reinviteP = invite(t, owner, x.email).then((r) => r);
      await gate.waitedOnBy(pid);
      await gate.open();
      [accepted, reinvited] = await Promise.all([acceptP, reinviteP]);
    } finally {
      await gate.release();
    }
    expect(accepted.status).toBe(200);
    expect([reinvited.status, reinvited.body.code]).toEqual([409, 'member/exists']);
    expect(await pendingRows(owner.tenantId, x.email.toLowerCase())).toHaveLength(0);
    // nothing of the refused re-invitation was written: no audit row, no mail
    const audited = await t.db.query(`SELECT 1 FROM audit_events WHERE tenant_id = $1 AND type = 'dashboard.member_invited'`, [owner.tenantId]);
    expect(audited).toHaveLength(1);
    expect(await queuedMails(x.email.toLowerCase())).toBe(1);
  });

  it('re-inviting keeps the invitation\'s place in the list: a client paging through the pending invitations meanwhile sees each one once', async () => {
    const owner = await signupTenant(t);
    const emails = Array.from({ length: 6 }, (_, i) => uniqueEmail(`paged${i}`));
    for (const email of emails) await invite(t, owner, email).expect(201);
    const seen: string[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < 10; page++) {
      const res = await t.http().get(`/v1/auth/dashboard/tenants/${owner.slug}/invites?limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`).set('Cookie', owner.cookie).expect(200);
      seen.push(...res.body.data.map((x: { email: string }) => x.email));
      // after the first page (the newest two), the oldest invitation is sent again
      if (page === 0) await invite(t, owner, emails[0], 'owner').expect(201);
      if (!res.body.pagination.has_more) break;
      cursor = res.body.pagination.next_cursor;
    }
    expect(seen.sort()).toEqual([...emails].sort());
  });

  it('an expired invitation is renewed by a new one; invitations of other tenants for the address stay apart', async () => {
    const [a, b] = [await signupTenant(t), await signupTenant(t)];
    const email = uniqueEmail('expired');
    const old = await invite(t, a, email).expect(201);
    await t.db.query(`UPDATE dashboard_invites SET expires_at = now() - interval '1 second' WHERE tenant_id = $1 AND email_normalized = $2`, [a.tenantId, email]);
    expect((await accept(old.body.invite_token).expect(400)).body.code).toBe('invite/invalid');
    const fromB = await invite(t, b, email).expect(201);
    const renewed = await invite(t, a, email).expect(201);
    expect(await pendingRows(a.tenantId, email)).toHaveLength(1);
    expect(await pendingRows(b.tenantId, email)).toHaveLength(1);
    const joined = await accept(renewed.body.invite_token).expect(200);
    expect(joined.body.memberships).toEqual([{ tenant_id: a.tenantId, tenant_slug: a.slug, role: 'member' }]);
    // B's invitation is still good: the new account joins B with its password
    const both = await accept(fromB.body.invite_token).expect(200);
    expect(both.body.memberships.map((m: { tenant_slug: string }) => m.tenant_slug).sort()).toEqual([a.slug, b.slug].sort());
  });

  it('limits invitation mails per address across all tenants: the 4th within the hour is 429 rate_limit/exceeded with Retry-After, nothing sent', async () => {
    const tenants = [await signupTenant(t), await signupTenant(t), await signupTenant(t), await signupTenant(t)];
    const email = uniqueEmail('victim');
    // three invitations from three tenants (re-inviting from one would count the same way)
    for (const d of tenants.slice(0, 3)) await invite(t, d, email, 'owner').expect(201);
    const refused = await invite(t, tenants[3], email, 'owner').expect(429);
    expect(refused.body.code).toBe('rate_limit/exceeded');
    const retryAfter = Number(refused.headers['retry-after']);
    expect(retryAfter).toBeGreaterThan(3000);
    expect(retryAfter).toBeLessThanOrEqual(3600);
    expect(refused.headers['x-service-docs']).toBeTruthy();
    // another spelling of the address is the same address; re-inviting from a tenant that has a pending invitation too
    expect((await invite(t, tenants[3], email.toUpperCase()).expect(429)).body.code).toBe('rate_limit/exceeded');
    expect((await invite(t, tenants[0], email).expect(429)).body.code).toBe('rate_limit/exceeded');
    expect(await queuedMails(email)).toBe(3);
    expect(await pendingRows(tenants[3].tenantId, email)).toHaveLength(0);
    expect(await t.db.query(`SELECT 1 FROM audit_events WHERE tenant_id = $1 AND type = 'dashboard.member_invited'`, [tenants[3].tenantId])).toHaveLength(0);
    // other addresses are not affected
    await invite(t, tenants[3], uniqueEmail('other')).expect(201);
  });

  it('an invitation that mails nothing (a member already, an address the tenant refuses) counts in no limit', async () => {
    const [a, b, c, d, e] = [await signupTenant(t), await signupTenant(t), await signupTenant(t), await signupTenant(t), await signupTenant(t)];
    // a's owner is a member of a: inviting them there is 409 as often as asked, and uses none of
    // the address's three mails
    for (let i = 0; i < 5; i++) expect((await invite(t, a, a.email).expect(409)).body.code).toBe('member/exists');
    for (const from of [b, c, d]) await invite(t, from, a.email).expect(201);
    await invite(t, e, a.email).expect(429);
    // an address the tenant's policy refuses: 422, as often as asked
    const domain = `refused${Date.now()}.example`;
    await t.http().put(`/v1/auth/dashboard/tenants/${b.slug}/settings/email-domains`).set('Cookie', b.cookie).set('X-CSRF-Token', b.csrf).send({ blocklist: [domain] }).expect(200);
    const refusedAddress = `someone@${domain}`;
    for (let i = 0; i < 5; i++) expect((await invite(t, b, refusedAddress).expect(422)).body.code).toBe('email/domain_blocked');
    for (const from of [a, c, d]) await invite(t, from, refusedAddress).expect(201);
    await invite(t, e, refusedAddress).expect(429);
  });
});

describe('dashboard invitations: the per-tenant daily cap', () => {
  let w: MailWorld;
  let t: TestApp;
  beforeAll(async () => {
    w = await startMailWorld({ RATE_LIMIT_INVITES_PER_TENANT_PER_DAY: '3' });
    t = w.t;
  }, 60_000);
  afterAll(() => w.close());

  const invite = (d: DashboardFixture, email: string) =>
    t.http().post(`/v1/auth/dashboard/tenants/${d.slug}/members`).set('Cookie', d.cookie).set('X-CSRF-Token', d.csrf).send({ email, role: 'member' });

  it('a tenant sends at most RATE_LIMIT_INVITES_PER_TENANT_PER_DAY invitations a day (re-invitations count); then 429 with Retry-After, other tenants unaffected', async () => {
    const d = await signupTenant(t);
    const first = uniqueEmail('cap');
    await invite(d, first).expect(201);
    await invite(d, first).expect(201); // a re-invitation mails again: it counts
    await invite(d, uniqueEmail('cap')).expect(201);
    const refused = await invite(d, uniqueEmail('cap')).expect(429);
    expect(refused.body.code).toBe('rate_limit/exceeded');
    const retryAfter = Number(refused.headers['retry-after']);
    expect(retryAfter).toBeGreaterThan(3600);
    expect(retryAfter).toBeLessThanOrEqual(86400);
    expect(refused.headers['x-service-docs']).toBeTruthy();
    expect((await invite(d, first).expect(429)).body.code).toBe('rate_limit/exceeded');
    expect(await t.db.query(`SELECT 1 FROM dashboard_invites WHERE tenant_id = $1`, [d.tenantId])).toHaveLength(2);
    await invite(await signupTenant(t), uniqueEmail('cap')).expect(201);
  });

  it("a request refused by the per-address limit uses none of the tenant's allowance", async () => {
    const email = uniqueEmail('flooded');
    for (let i = 0; i < 3; i++) await invite(await signupTenant(t), email).expect(201);
    const d = await signupTenant(t);
    for (let i = 0; i < 3; i++) await invite(d, email).expect(429);
    for (let i = 0; i < 3; i++) await invite(d, uniqueEmail('fresh')).expect(201);
    await invite(d, uniqueEmail('fresh')).expect(429);
  });
});

describe('dashboard invitations: the migration to one pending invitation per address', () => {
  let t: TestApp & { databaseUrl: string };
  beforeAll(async () => {
    t = await createIsolatedTestApp();
  });
  afterAll(() => t.close());

  it('keeps the newest pending invitation of each (tenant, address), accepted ones and other tenants\' ones; a second pending one is refused after', async () => {
    await t.db.query(`DROP INDEX dashboard_invites_pending_uq`);
    const [a, b] = [await createTenant(t.db), await createTenant(t.db)];
    const insert = async (tenantId: string, key: string, token: string, ageMinutes: number, accepted = false) =>
      (
        await t.db.query<{ id: string }>(
          `INSERT INTO dashboard_invites (tenant_id, email, email_normalized, role, token_hash, created_at, expires_at, accepted_at)
           VALUES ($1, $2, $2, 'member', $3, now() - make_interval(mins => $4), now() + interval '1 day', CASE WHEN $5 THEN now() END) RETURNING id`,
          [tenantId, key, sha256Hex(token), ageMinutes, accepted],
        )
      )[0].id;
    const key = uniqueEmail('dup');
    const oldest = await insert(a.id, key, 'oldest', 30);
    const newest = await insert(a.id, key, 'newest', 10);
    const middle = await insert(a.id, key, 'middle', 20);
    const used = await insert(a.id, key, 'used', 40, true);
    const otherTenant = await insert(b.id, key, 'other', 50);
    const otherAddress = await insert(a.id, uniqueEmail('single'), 'single', 50);

    const ds = createDataSource({ DATABASE_URL: t.databaseUrl, DATABASE_POOL_SIZE: 2 });
    await ds.initialize();
    const runner = ds.createQueryRunner();
    try {
      // as the migration runner does (transaction 'each')
      await runner.startTransaction();
      await new DashboardInvitePending1765360000000().up(runner);
      await runner.commitTransaction();
    } finally {
      await runner.release();
      await ds.destroy();
    }
    const left = (await t.db.query<{ id: string }>(`SELECT id FROM dashboard_invites WHERE id = ANY($1)`, [[oldest, newest, middle, used, otherTenant, otherAddress]])).map((r) => r.id);
    expect(left.sort()).toEqual([newest, used, otherTenant, otherAddress].sort());
    await expect(insert(a.id, key, 'another', 0)).rejects.toMatchObject({ code: '23505' });
    await insert(a.id, key, 'accepted too', 0, true);
  });
});
