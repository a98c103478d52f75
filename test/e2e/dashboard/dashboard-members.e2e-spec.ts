import { sessionCookie, signupTenant } from '../../factories/dashboard.factory';
import { createTestApp, randomIp, STRONG_PASSWORD, TestApp, uniqueEmail } from '../../setup/app';
import { gateWrites } from '../../setup/hold-writes';
import { addMember, as, Session, throttleState as accountThrottle } from '../agents/agents.helpers';
import { normalizeEmail } from '../../../src/modules/users/email';

/**
 * Members of a tenant's dashboard: list (any member), change a role and remove (owners, after a
 * reauth). A tenant always keeps an owner, also when two owners act at once.
 */
describe('dashboard members: list, change role, remove', () => {
  let t: TestApp;
  beforeAll(async () => {
    // addMember accepts every invitation from one client address: room for this file's 20-odd acceptances a minute
    t = await createTestApp({ RATE_LIMIT_SIGNUP_PER_MIN: '25' });
  });
  afterAll(() => t.close());

  const url = (s: { slug: string }, rest = '') => `/v1/auth/dashboard/tenants/${s.slug}/members${rest}`;
  const audits = (tenantId: string, type: string) =>
    t.db.query<{ actor_id: string; target_id: string; severity: string; metadata: Record<string, unknown> }>(
      `SELECT actor_id, target_id, severity, metadata FROM audit_events WHERE tenant_id = $1 AND type = $2 ORDER BY created_at`,
      [tenantId, type],
    );

  it('lists the members, newest first, to every member; pages with a cursor; another tenant\'s slug is 404', async () => {
    const owner = await signupTenant(t);
    const alice = await addMember(t, owner, 'member');
    const bob = await addMember(t, owner, 'owner');
    const res = await as(t, alice).get(url(owner)).expect(200);
    expect(res.body.data).toEqual([
      { user_id: bob.userId, email: bob.email, role: 'owner', joined_at: expect.any(String) },
      { user_id: alice.userId, email: alice.email, role: 'member', joined_at: expect.any(String) },
      { user_id: owner.userId, email: owner.email, role: 'owner', joined_at: expect.any(String) },
    ]);
    expect(res.body.pagination).toEqual({ next_cursor: null, has_more: false });
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const page: { body: { data: { user_id: string }[]; pagination: { next_cursor: string | null } } } = await as(t, owner)
        .get(url(owner, `?limit=1${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`))
        .expect(200);
      seen.push(...page.body.data.map((m) => m.user_id));
      cursor = page.body.pagination.next_cursor;
    } while (cursor);
    expect(seen).toEqual([bob.userId, alice.userId, owner.userId]);
    const other = await signupTenant(t);
    expect((await as(t, owner).get(url(other)).expect(404)).body.code).toBe('tenant/not_found');
    expect((await as(t, owner).get(url(owner, '?limit=101')).expect(400)).body.code).toBe('request/invalid');
  });

  it('an owner changes a role (audited; the same role again changes nothing); members cannot; bad bodies 400; unknown, malformed and other tenants\' ids 404', async () => {
    const owner = await signupTenant(t);
    const alice = await addMember(t, owner, 'member');
    const promoted = await as(t, owner).patch(url(owner, `/${alice.userId}`), { role: 'owner' }).expect(200);
    expect(promoted.body).toEqual({ user_id: alice.userId, email: alice.email, role: 'owner', joined_at: expect.any(String) });
    await as(t, owner).patch(url(owner, `/${alice.userId}`), { role: 'owner' }).expect(200);
    expect(await audits(owner.tenantId, 'dashboard.member_role_changed')).toEqual([
      { actor_id: owner.userId, target_id: alice.userId, severity: 'medium', metadata: { from: 'member', to: 'owner' } },
    ]);
    // alice now writes as an owner: she may demote the original owner
    expect((await as(t, alice).patch(url(owner, `/${owner.userId}`), { role: 'member' }).expect(200)).body.role).toBe('member');
    // and the original owner, a member now, may not write
    expect((await as(t, owner).patch(url(owner, `/${alice.userId}`), { role: 'member' }).expect(403)).body.code).toBe('auth/forbidden');
    for (const body of [{}, { role: 'admin' }, { role: null }, { role: 'owner', extra: 1 }]) {
      expect((await as(t, alice).patch(url(owner, `/${owner.userId}`), body).expect(400)).body.code).toBe('request/invalid');
    }
    const stranger = await signupTenant(t);
    for (const id of [stranger.userId, '00000000-0000-4000-8000-000000000000', 'not-a-uuid']) {
      expect((await as(t, alice).patch(url(owner, `/${id}`), { role: 'member' }).expect(404)).body.code).toBe('member/not_found');
      expect((await as(t, alice).delete(url(owner, `/${id}`)).expect(404)).body.code).toBe('member/not_found');
    }
    // nothing changed in the stranger's own tenant
    expect((await as(t, stranger).get(url(stranger)).expect(200)).body.data).toEqual([expect.objectContaining({ user_id: stranger.userId, role: 'owner' })]);
  });

  it('the last owner can neither step down nor leave (409 member/last_owner); with another owner they can', async () => {
    const owner = await signupTenant(t);
    const member = await addMember(t, owner, 'member');
    expect((await as(t, owner).patch(url(owner, `/${owner.userId}`), { role: 'member' }).expect(409)).body.code).toBe('member/last_owner');
    expect((await as(t, owner).delete(url(owner, `/${owner.userId}`)).expect(409)).body.code).toBe('member/last_owner');
    await as(t, owner).patch(url(owner, `/${member.userId}`), { role: 'owner' }).expect(200);
    await as(t, owner).delete(url(owner, `/${owner.userId}`)).expect(204);
    expect((await as(t, owner).get(url(owner)).expect(404)).body.code).toBe('tenant/not_found');
    expect((await as(t, member).get(url(owner)).expect(200)).body.data).toEqual([expect.objectContaining({ user_id: member.userId, role: 'owner' })]);
  });

  it('a removed member loses the tenant at their next request; their account and other memberships stay; audited', async () => {
    const owner = await signupTenant(t);
    const member = await addMember(t, owner, 'member');
    const elsewhere = await signupTenant(t);
    // the member also belongs to another tenant (same account, invited there too)
    const inv = await as(t, elsewhere).post(`/v1/auth/dashboard/tenants/${elsewhere.slug}/members`, { email: member.email, role: 'member' }).expect(201);
    await t.http().post('/v1/auth/dashboard/invites/accept').send({ token: inv.body.invite_token, password: 'correct horse battery staple' }).expect(200);
    expect((await as(t, member).get(url(owner)).expect(200)).body.data).toHaveLength(2);
    await as(t, owner).delete(url(owner, `/${member.userId}`)).expect(204);
    expect((await as(t, member).get(url(owner)).expect(404)).body.code).toBe('tenant/not_found');
    expect((await as(t, member).get(`/v1/auth/dashboard/tenants/${owner.slug}/api-keys`).expect(404)).body.code).toBe('tenant/not_found');
    const me = await as(t, member).get('/v1/auth/dashboard/me').expect(200);
    expect(me.body.memberships).toEqual([{ tenant_id: elsewhere.tenantId, tenant_slug: elsewhere.slug, role: 'member' }]);
    expect(await audits(owner.tenantId, 'dashboard.member_removed')).toEqual([{ actor_id: owner.userId, target_id: member.userId, severity: 'medium', metadata: { role: 'member' } }]);
    // gone already: 404, no second event
    expect((await as(t, owner).delete(url(owner, `/${member.userId}`)).expect(404)).body.code).toBe('member/not_found');
    expect(await audits(owner.tenantId, 'dashboard.member_removed')).toHaveLength(1);
  });

  it('any member may leave a tenant by themself (after a reauth; audited dashboard.member_left); only owners remove others; the last owner cannot leave', async () => {
    const owner = await signupTenant(t);
    const member = await addMember(t, owner, 'member');
    const other = await addMember(t, owner, 'member');
    const elsewhere = await signupTenant(t);
    // a member removing another is refused as before, reauth or not (and before any reauth is asked)
    await t.db.query(`UPDATE dashboard_sessions SET created_at = created_at - interval '1 hour', reauth_at = NULL WHERE user_id = $1`, [member.userId]);
    expect((await as(t, member).delete(url(owner, `/${other.userId}`)).expect(403)).body.code).toBe('auth/forbidden');
    expect((await as(t, member).delete(url(owner, `/${owner.userId}`)).expect(403)).body.code).toBe('auth/forbidden');
    // leaving needs a recent sign-in or reauth too (a stolen session cannot drop its owner out of a tenant)
    expect((await as(t, member).delete(url(owner, `/${member.userId}`)).expect(403)).body.code).toBe('auth/reauth_required');
    await t.http().post('/v1/auth/dashboard/reauth').set('Cookie', member.cookie).set('X-CSRF-Token', member.csrf).send({ password: STRONG_PASSWORD }).expect(200);
    expect((await as(t, member).delete(url(owner, `/${other.userId}`)).expect(403)).body.code).toBe('auth/forbidden');
    // a member's write without the CSRF header is refused before anything else
    expect((await t.http().delete(url(owner, `/${member.userId}`)).set('Cookie', member.cookie).expect(403)).body.code).toBe('csrf/invalid');
    // another tenant's slug: the member is not in it
    expect((await as(t, member).delete(url(elsewhere, `/${member.userId}`)).expect(404)).body.code).toBe('tenant/not_found');
    // their own id in either case (the same UUID)
    await as(t, member).delete(url(owner, `/${member.userId.toUpperCase()}`)).expect(204);
    expect((await as(t, member).get(url(owner)).expect(404)).body.code).toBe('tenant/not_found');
    expect((await as(t, member).get('/v1/auth/dashboard/me').expect(200)).body.memberships).toEqual([]);
    expect((await as(t, owner).get(url(owner)).expect(200)).body.data.map((m: { user_id: string }) => m.user_id)).toEqual([other.userId, owner.userId]);
    expect(await audits(owner.tenantId, 'dashboard.member_left')).toEqual([{ actor_id: member.userId, target_id: member.userId, severity: 'medium', metadata: { role: 'member' } }]);
    expect(await audits(owner.tenantId, 'dashboard.member_removed')).toEqual([]);
    // gone already: the tenant is not theirs any more (404), no second event
    expect((await as(t, member).delete(url(owner, `/${member.userId}`)).expect(404)).body.code).toBe('tenant/not_found');
    expect(await audits(owner.tenantId, 'dashboard.member_left')).toHaveLength(1);
    // the last owner cannot leave; an owner with another owner can, and their pending invitations go with them
    expect((await as(t, owner).delete(url(owner, `/${owner.userId}`)).expect(409)).body.code).toBe('member/last_owner');
    await as(t, owner).patch(url(owner, `/${other.userId}`), { role: 'owner' }).expect(200);
    await as(t, owner).post(url(owner), { email: `pending-${Date.now()}@example.com`, role: 'member' }).expect(201);
    await as(t, owner).delete(url(owner, `/${owner.userId}`)).expect(204);
    expect(await t.db.query(`SELECT 1 FROM dashboard_invites WHERE tenant_id = $1 AND accepted_at IS NULL`, [owner.tenantId])).toHaveLength(0);
    expect(await audits(owner.tenantId, 'dashboard.member_left')).toEqual([
      expect.objectContaining({ actor_id: member.userId }),
      { actor_id: owner.userId, target_id: owner.userId, severity: 'medium', metadata: { role: 'owner' } },
    ]);
    expect((await as(t, other).get(url(owner)).expect(200)).body.data).toEqual([expect.objectContaining({ user_id: other.userId, role: 'owner' })]);
  });

  it('changing or removing needs a recent sign-in or reauth (403 auth/reauth_required); listing does not', async () => {
    const owner = await signupTenant(t);
    const member = await addMember(t, owner, 'member');
    await t.db.query(`UPDATE dashboard_sessions SET created_at = created_at - interval '1 hour', reauth_at = NULL WHERE user_id = $1`, [owner.userId]);
    expect((await as(t, owner).patch(url(owner, `/${member.userId}`), { role: 'owner' }).expect(403)).body.code).toBe('auth/reauth_required');
    expect((await as(t, owner).delete(url(owner, `/${member.userId}`)).expect(403)).body.code).toBe('auth/reauth_required');
    await as(t, owner).get(url(owner)).expect(200);
    await t.http().post('/v1/auth/dashboard/reauth').set('Cookie', owner.cookie).set('X-CSRF-Token', owner.csrf).send({ password: owner.password }).expect(200);
    await as(t, owner).delete(url(owner, `/${member.userId}`)).expect(204);
  });

  it('an owner removed or demoted cannot come back, nor bring anyone in, through an invitation sent before', async () => {
    for (const action of ['remove', 'demote'] as const) {
      const owner = await signupTenant(t);
      const rogue = await addMember(t, owner, 'owner');
      const planted = await as(t, rogue).post(url(owner), { email: `alt-${action}-${Date.now()}@example.com`, role: 'owner' }).expect(201);
      if (action === 'remove') await as(t, owner).delete(url(owner, `/${rogue.userId}`)).expect(204);
      else await as(t, owner).patch(url(owner, `/${rogue.userId}`), { role: 'member' }).expect(200);
      // withdrawn with the change (the pending row is gone, its withdrawal audited as the changing
      // owner's, with the reason); acceptance refuses it in any case
      expect(await t.db.query(`SELECT 1 FROM dashboard_invites WHERE tenant_id = $1 AND invited_by = $2 AND accepted_at IS NULL`, [owner.tenantId, rogue.userId])).toHaveLength(0);
      const withdrawn = await t.db.query<{ actor_id: string; metadata: unknown }>(
        `SELECT actor_id, metadata FROM audit_events WHERE tenant_id = $1 AND type = 'dashboard.invite_revoked'`,
        [owner.tenantId],
      );
      expect(withdrawn).toEqual([{ actor_id: owner.userId, metadata: { role: 'owner', reason: 'inviter_no_longer_owner' } }]);
      const accepted = await t.http().post('/v1/auth/dashboard/invites/accept').send({ token: planted.body.invite_token, password: 'correct horse battery staple' });
      expect([accepted.status, accepted.body.code]).toEqual([400, 'invite/invalid']);
      expect((await as(t, owner).get(url(owner)).expect(200)).body.data.map((m: { role: string }) => m.role).filter((r: string) => r === 'owner')).toHaveLength(1);
    }
    // acceptance checks the inviter too (an invitation row left behind by anything else)
    const owner = await signupTenant(t);
    const other = await addMember(t, owner, 'owner');
    const inv = await as(t, other).post(url(owner), { email: `late-${Date.now()}@example.com`, role: 'owner' }).expect(201);
    await t.db.query(`UPDATE tenant_members SET role = 'member' WHERE tenant_id = $1 AND user_id = $2`, [owner.tenantId, other.userId]);
    expect((await t.http().post('/v1/auth/dashboard/invites/accept').send({ token: inv.body.invite_token, password: 'correct horse battery staple' }).expect(400)).body.code).toBe('invite/invalid');
  });

  it('a change sent by an owner who is removed while it waits has no effect (the actor\'s role is read again under the lock)', async () => {
    const a = await signupTenant(t);
    const b = await addMember(t, a, 'owner');
    const c = await addMember(t, a, 'member');
    // the pid of a backend other than `except` waiting for a lock one of `holders` holds
    const waiterOn = async (holders: number[], except: number[] = []) => {
      for (let i = 0; i < 500; i++) {
        const [r] = await t.db.query<{ pid: number }>(
          `SELECT pid FROM pg_stat_activity WHERE NOT (pid = ANY($2::int[])) AND pg_blocking_pids(pid) && $1::int[] LIMIT 1`,
          [holders, except],
        );
        if (r) return r.pid;
        await new Promise((res) => setTimeout(res, 20));
      }
      throw new Error(`no statement ever waited for ${holders.join(', ')}`);
    };
    const outcome = await t.db.tx(async (tx) => {
      await tx.query(`SELECT 1 FROM tenants WHERE id = $1 FOR UPDATE`, [a.tenantId]);
      const [{ pid: holder }] = await tx.query<{ pid: number }>(`SELECT pg_backend_pid() AS pid`);
      // the first removal queues on the tenant row, then the second one behind it
      const first = as(t, a).delete(url(a, `/${b.userId}`)).then((r) => r);
      const firstPid = await waiterOn([holder]);
      const second = as(t, b).delete(url(a, `/${c.userId}`)).then((r) => r);
      await waiterOn([holder, firstPid], [firstPid]);
      return { first, second }; // not the promises themselves: the transaction must commit first
    });
    expect((await outcome.first).status).toBe(204);
    const second = await outcome.second;
    expect([second.status, second.body.code]).toEqual([404, 'tenant/not_found']);
    expect((await as(t, a).get(url(a)).expect(200)).body.data.map((m: { user_id: string }) => m.user_id)).toContain(c.userId);
  });

  it('pending invitations: every member lists them; an owner withdraws one (its token refused after); others\' ids 404', async () => {
    const owner = await signupTenant(t);
    const member = await addMember(t, owner, 'member');
    const invites = (s: Session, rest = '') => `/v1/auth/dashboard/tenants/${s.slug}/invites${rest}`;
    const first = await as(t, owner).post(url(owner), { email: `first-${Date.now()}@example.com`, role: 'member' }).expect(201);
    const second = await as(t, owner).post(url(owner), { email: `second-${Date.now()}@example.com`, role: 'owner' }).expect(201);
    // an expired one is not pending
    const third = await as(t, owner).post(url(owner), { email: `third-${Date.now()}@example.com`, role: 'member' }).expect(201);
    await t.db.query(`UPDATE dashboard_invites SET expires_at = now() - interval '1 second' WHERE token_hash = encode(sha256(convert_to($1, 'UTF8')), 'hex')`, [third.body.invite_token]);
    const listed = await as(t, member).get(invites(owner)).expect(200);
    expect(listed.body.data).toEqual([
      { id: expect.any(String), email: expect.stringMatching(/^second-/), role: 'owner', invited_by: owner.userId, created_at: expect.any(String), expires_at: expect.any(String) },
      { id: expect.any(String), email: expect.stringMatching(/^first-/), role: 'member', invited_by: owner.userId, created_at: expect.any(String), expires_at: expect.any(String) },
    ]);
    expect(listed.body.pagination).toEqual({ next_cursor: null, has_more: false });
    const [secondId, firstId] = listed.body.data.map((i: { id: string }) => i.id);
    expect((await as(t, member).delete(invites(owner, `/${secondId}`)).expect(403)).body.code).toBe('auth/forbidden');
    await as(t, owner).delete(invites(owner, `/${secondId}`)).expect(204);
    expect((await t.http().post('/v1/auth/dashboard/invites/accept').send({ token: second.body.invite_token, password: 'correct horse battery staple' }).expect(400)).body.code).toBe('invite/invalid');
    expect((await as(t, owner).delete(invites(owner, `/${secondId}`)).expect(404)).body.code).toBe('invite/not_found');
    const stranger = await signupTenant(t);
    for (const id of [firstId, '00000000-0000-4000-8000-000000000000', 'not-a-uuid']) {
      expect((await as(t, stranger).delete(invites(stranger, `/${id}`)).expect(404)).body.code).toBe('invite/not_found');
    }
    expect((await as(t, stranger).get(invites(owner)).expect(404)).body.code).toBe('tenant/not_found');
    // the other one still works
    await t.http().post('/v1/auth/dashboard/invites/accept').send({ token: first.body.invite_token, password: 'correct horse battery staple' }).expect(200);
    expect((await as(t, owner).get(invites(owner)).expect(200)).body.data).toEqual([]);
    expect(await audits(owner.tenantId, 'dashboard.invite_revoked')).toEqual([{ actor_id: owner.userId, target_id: secondId, severity: 'info', metadata: { role: 'owner' } }]);
  });

  it('two owners demoting or removing each other, or both leaving, at once: one wins, the tenant keeps an owner, no 5xx', async () => {
    for (const action of ['demote', 'remove', 'leave'] as const) {
      for (let round = 0; round < 3; round++) {
        const a: Session = await signupTenant(t);
        const b = await addMember(t, a, 'owner');
        const act = (actor: Session, target: Session) =>
          action === 'demote'
            ? as(t, actor).patch(url(a, `/${target.userId}`), { role: 'member' })
            : as(t, actor).delete(url(a, `/${(action === 'leave' ? actor : target).userId}`));
        const answers = await Promise.all([act(a, b), act(b, a)]);
        const statuses = answers.map((r) => r.status).sort();
        // the loser is no owner any more (403) or would remove the last one (409); of two leaving, the second is the last
        expect(statuses[0]).toBe(action === 'demote' ? 200 : 204);
        if (action === 'leave') expect(statuses[1]).toBe(409);
        else expect([403, 404, 409]).toContain(statuses[1]);
        const owners = await t.db.query(`SELECT 1 FROM tenant_members WHERE tenant_id = $1 AND role = 'owner'`, [a.tenantId]);
        expect(owners).toHaveLength(1);
      }
    }
  });
});

/**
 * A dashboard user erases their own account (GDPR Art. 17): DELETE /v1/auth/dashboard/me, after a
 * recent sign-in or reauth, refused while they are the last owner of a tenant. The account leaves
 * every tenant as a member leaving one does, under the same tenant locks: a removal, a role change
 * or another owner leaving at the same moment never leaves a tenant without an owner.
 */
describe('dashboard account deletion (DELETE /v1/auth/dashboard/me)', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp({ RATE_LIMIT_SIGNUP_PER_MIN: '25' });
  });
  afterAll(() => t.close());

  const members = (s: { slug: string }, rest = '') => `/v1/auth/dashboard/tenants/${s.slug}/members${rest}`;
  const erase = (s: Session) => as(t, s).delete('/v1/auth/dashboard/me');
  const audits = (type: string, id: string) =>
    t.db.query<{ tenant_id: string | null; actor_id: string; target_id: string; severity: string; metadata: Record<string, unknown> }>(
      `SELECT tenant_id, actor_id, target_id, severity, metadata FROM audit_events WHERE type = $1 AND (actor_id = $2 OR target_id = $2) ORDER BY created_at`,
      [type, id],
    );
  const owners = async (tenantId: string) => (await t.db.query(`SELECT 1 FROM tenant_members WHERE tenant_id = $1 AND role = 'owner'`, [tenantId])).length;
  const accountRows = async (userId: string) =>
    (await t.db.query<{ n: number }>(
      `SELECT (SELECT count(*) FROM dashboard_users WHERE id = $1) + (SELECT count(*) FROM dashboard_sessions WHERE user_id = $1)
            + (SELECT count(*) FROM tenant_members WHERE user_id = $1) + (SELECT count(*) FROM dashboard_password_resets WHERE user_id = $1)
            + (SELECT count(*) FROM dashboard_invites WHERE invited_by = $1) AS n`,
      [userId],
    ))[0].n;
  const login = (email: string, password = STRONG_PASSWORD) => t.http().post('/v1/auth/dashboard/login').set('X-Forwarded-For', randomIp()).send({ email, password });

  it('erases the account: memberships (audited member_left per tenant), pending invitations, sessions everywhere, reset links and the row go; the cookie is cleared; the address can join again as a new account', async () => {
    const a = await signupTenant(t);
    const b = await signupTenant(t);
    const u = await addMember(t, a, 'owner');
    // u is a member of a second tenant too (same account), sent an invitation and created an API key in the first
    const inv = await as(t, b).post(members(b), { email: u.email, role: 'member' }).expect(201);
    await t.http().post('/v1/auth/dashboard/invites/accept').send({ token: inv.body.invite_token, password: STRONG_PASSWORD }).expect(200);
    await as(t, u).post(members(a), { email: uniqueEmail('pending'), role: 'member' }).expect(201);
    const key = await as(t, u).post(`/v1/auth/dashboard/tenants/${a.slug}/api-keys`, { name: 'made by u' }).expect(201);
    // another session elsewhere (the second acceptance opened one too), and a reset link
    const other = sessionCookie((await login(u.email).expect(200)).headers['set-cookie']);
    await t.http().post('/v1/auth/dashboard/password/forgot').set('X-Forwarded-For', randomIp()).send({ email: u.email }).expect(202);
    expect(Number(await accountRows(u.userId))).toBeGreaterThan(4);
    // the failed sign-in throttle knows the address's client addresses (the sign-ins above) and a failure
    expect((await login(u.email, 'not the password at all').expect(401)).body.code).toBe('auth/invalid_credentials');
    const throttleState = () => accountThrottle('dashboard', normalizeEmail(u.email));
    expect(await throttleState()).toEqual({ known: expect.any(Number), failures: 1 });
    expect((await throttleState()).known).toBeGreaterThan(0);

    const res = await erase(u).expect(204);
    // ... which a new account of the address would inherit: forgotten with the account
    expect(await throttleState()).toEqual({ known: 0, failures: 0 });
    const cleared = ([] as string[]).concat(res.headers['set-cookie'] ?? []).find((c) => c.startsWith('authp_dashboard='));
    expect(cleared).toMatch(/^authp_dashboard=;.*(Max-Age=0|Expires=Thu, 01 Jan 1970)/);
    expect(Number(await accountRows(u.userId))).toBe(0);
    // what the account created stays, without a reference to it
    expect(await t.db.query(`SELECT created_by FROM api_keys WHERE id = $1`, [key.body.id])).toEqual([{ created_by: null }]);
    // its sessions are refused at once; the old password signs nothing in
    for (const cookie of [u.cookie, other]) expect((await t.http().get('/v1/auth/dashboard/me').set('Cookie', cookie).expect(401)).body.code).toBe('auth/unauthorized');
    expect((await login(u.email).expect(401)).body.code).toBe('auth/invalid_credentials');
    expect((await as(t, a).get(members(a)).expect(200)).body.data.map((m: { user_id: string }) => m.user_id)).toEqual([a.userId]);
    // audited: left each tenant, the invitation withdrawn, the erasure itself (ids and hash prefixes, never the address)
    const left = await audits('dashboard.member_left', u.userId);
    expect(left.map((r) => r.tenant_id).sort()).toEqual([a.tenantId, b.tenantId].sort());
    expect(left.map((r) => r.metadata.role).sort()).toEqual(['member', 'owner']);
    for (const r of left) expect(r).toMatchObject({ actor_id: u.userId, target_id: u.userId, severity: 'medium', metadata: { reason: 'account_deleted' } });
    const withdrawn = await t.db.query(`SELECT actor_id FROM audit_events WHERE tenant_id = $1 AND type = 'dashboard.invite_revoked'`, [a.tenantId]);
    expect(withdrawn).toEqual([{ actor_id: u.userId }]);
    expect(await audits('dashboard.account_deleted', u.userId)).toEqual([
      {
        tenant_id: null, actor_id: u.userId, target_id: u.userId, severity: 'high',
        metadata: { session_id: expect.any(String), tenants_left: 2, sessions_ended: 3, unsent_mails_dropped: 3, ip_hash_prefix: expect.any(String), user_agent_hash_prefix: null },
      },
    ]);
    const localPart = u.email.split('@')[0];
    expect(await t.db.query(`SELECT type FROM audit_events WHERE (actor_id = $1 OR target_id = $1) AND row_to_json(audit_events)::text ILIKE $2`, [u.userId, `%${localPart}%`])).toEqual([]);
    // the address is invited again: a new account, with a new password
    const again = await as(t, a).post(members(a), { email: u.email, role: 'member' }).expect(201);
    const joined = await t.http().post('/v1/auth/dashboard/invites/accept').send({ token: again.body.invite_token, password: 'another long passphrase 42' }).expect(200);
    expect(joined.body.user.id).not.toBe(u.userId);
    expect(joined.body.memberships).toEqual([{ tenant_id: a.tenantId, tenant_slug: a.slug, role: 'member' }]);
  });

  it('the last owner of a tenant is refused (409 member/last_owner naming the tenants), nothing changes; with another owner the account goes and the address can sign up again', async () => {
    const u = await signupTenant(t);
    const mine = await signupTenant(t);
    const x = await addMember(t, mine, 'member');
    const elsewhere = await signupTenant(t);
    const inv = await as(t, elsewhere).post(members(elsewhere), { email: u.email, role: 'member' }).expect(201);
    await t.http().post('/v1/auth/dashboard/invites/accept').send({ token: inv.body.invite_token, password: STRONG_PASSWORD }).expect(200);
    const second = await as(t, mine).post(members(mine), { email: u.email, role: 'owner' }).expect(201);
    await t.http().post('/v1/auth/dashboard/invites/accept').send({ token: second.body.invite_token, password: STRONG_PASSWORD }).expect(200);
    // sole owner of its own tenant and of `mine` once mine's signer leaves; co-owner of nothing else
    await as(t, mine).delete(members(mine, `/${mine.userId}`)).expect(204);
    const before = Number(await accountRows(u.userId));
    const refused = await erase(u).expect(409);
    expect(refused.body).toMatchObject({ code: 'member/last_owner', status: 409 });
    expect([...refused.body.tenant_slugs].sort()).toEqual([u.slug, mine.slug].sort());
    expect(refused.body.detail).toContain(u.slug);
    expect(refused.body.detail).toContain(mine.slug);
    expect(Number(await accountRows(u.userId))).toBe(before);
    expect((await as(t, u).get('/v1/auth/dashboard/me').expect(200)).body.memberships).toHaveLength(3);
    expect(await audits('dashboard.member_left', u.userId)).toEqual([]);
    expect(await audits('dashboard.account_deleted', u.userId)).toEqual([]);
    // another owner in each: the account may go
    await as(t, u).patch(members(mine, `/${x.userId}`), { role: 'owner' }).expect(200);
    const y = await addMember(t, { ...u, slug: u.slug, tenantId: u.tenantId }, 'owner');
    await erase(u).expect(204);
    expect(await owners(u.tenantId)).toBe(1);
    expect(await owners(mine.tenantId)).toBe(1);
    expect((await as(t, y).get(members(u)).expect(200)).body.data.map((m: { user_id: string }) => m.user_id)).toEqual([y.userId]);
    // the address signs up again: a new account
    const res = await t.http().post('/v1/onboarding/signup').set('X-Forwarded-For', randomIp())
      .send({ email: u.email, password: STRONG_PASSWORD, tenant_name: 'Again', consent_terms: true, consent_privacy: true }).expect(201);
    expect(res.body.user.id).not.toBe(u.userId);
  });

  it('needs the session (401), the CSRF header (403 csrf/invalid) and a recent sign-in or reauth (403 auth/reauth_required)', async () => {
    const a = await signupTenant(t);
    const u = await addMember(t, a, 'member');
    expect((await t.http().delete('/v1/auth/dashboard/me').expect(401)).body.code).toBe('auth/unauthorized');
    expect((await t.http().delete('/v1/auth/dashboard/me').set('Cookie', u.cookie).expect(403)).body.code).toBe('csrf/invalid');
    expect((await t.http().delete('/v1/auth/dashboard/me').set('Cookie', u.cookie).set('X-CSRF-Token', 'wrong').expect(403)).body.code).toBe('csrf/invalid');
    await t.db.query(`UPDATE dashboard_sessions SET created_at = created_at - interval '1 hour', reauth_at = NULL WHERE user_id = $1`, [u.userId]);
    expect((await erase(u).expect(403)).body.code).toBe('auth/reauth_required');
    expect(await t.db.query(`SELECT 1 FROM dashboard_users WHERE id = $1`, [u.userId])).toHaveLength(1);
    expect(await audits('dashboard.member_left', u.userId)).toEqual([]);
    await t.http().post('/v1/auth/dashboard/reauth').set('Cookie', u.cookie).set('X-CSRF-Token', u.csrf).send({ password: STRONG_PASSWORD }).expect(200);
    await erase(u).expect(204);
    expect(Number(await accountRows(u.userId))).toBe(0);
  });

  it('two DELETEs of one account at once: one erases it (204), the other waits for it and finds its session gone (401); one audit row', async () => {
    const a = await signupTenant(t);
    const u = await addMember(t, a, 'member');
    // a second session of the account: the second DELETE is not refused by its own session's row alone
    const other = await login(u.email).expect(200);
    const s2: Session = { ...u, cookie: sessionCookie(other.headers['set-cookie']), csrf: other.body.csrf_token };
    const gate = await gateWrites(t.db, 'audit_events', 'INSERT', `NEW.type = 'dashboard.account_deleted' AND NEW.actor_id = '${u.userId}'`);
    let first, second;
    try {
      const firstP = erase(u).then((r) => r);
      const pid = await gate.reached();
      const secondP = erase(s2).then((r) => r);
      await gate.waitedOnBy(pid);
      await gate.open();
      [first, second] = await Promise.all([firstP, secondP]);
    } finally {
      await gate.release();
    }
    expect([first.status, second.status, second.body.code]).toEqual([204, 401, 'auth/unauthorized']);
    expect(await audits('dashboard.account_deleted', u.userId)).toHaveLength(1);
    expect(await audits('dashboard.member_left', u.userId)).toHaveLength(1);
    expect(Number(await accountRows(u.userId))).toBe(0);
  });

  it("a write of the account's other session racing its erasure (an API key it creates) is 503 retry, not 500; the retry is 401", async () => {
    const a = await signupTenant(t);
    const u = await addMember(t, a, 'owner');
    const other = await login(u.email).expect(200);
    const s2: Session = { ...u, cookie: sessionCookie(other.headers['set-cookie']), csrf: other.body.csrf_token };
    const gate = await gateWrites(t.db, 'audit_events', 'INSERT', `NEW.type = 'dashboard.account_deleted' AND NEW.actor_id = '${u.userId}'`);
    let erased, created;
    try {
      const erasedP = erase(u).then((r) => r);
      const pid = await gate.reached();
      // the account's row is deleted (uncommitted): the key's insert waits for it on its foreign key
      const createdP = as(t, s2).post(`/v1/auth/dashboard/tenants/${a.slug}/api-keys`, { name: 'racing' }).then((r) => r);
      await gate.waitedOnBy(pid);
      await gate.open();
      [erased, created] = await Promise.all([erasedP, createdP]);
    } finally {
      await gate.release();
    }
    expect(erased.status).toBe(204);
    expect([created.status, created.body.code, created.headers['retry-after']]).toEqual([503, 'server/unavailable', '1']);
    expect(await t.db.query(`SELECT 1 FROM api_keys WHERE name = 'racing' AND tenant_id = $1`, [a.tenantId])).toEqual([]);
    const retried = await as(t, s2).post(`/v1/auth/dashboard/tenants/${a.slug}/api-keys`, { name: 'racing' });
    expect([retried.status, retried.body.code]).toEqual([401, 'auth/unauthorized']);
  });

  it('racing the other owner (leaving, stepping down, or removing the account): one waits for the other, the tenant always keeps an owner, no 5xx', async () => {
    // run `first` until it is inside its transaction (the gated audit row, its locks held), send `second`, let both finish
    const race = async (gateWhen: string, first: () => Promise<{ status: number; body: { code?: string } }>, second: () => Promise<{ status: number; body: { code?: string } }>) => {
      const gate = await gateWrites(t.db, 'audit_events', 'INSERT', gateWhen);
      try {
        const firstP = first().then((r) => r);
        const pid = await gate.reached();
        const secondP = second().then((r) => r);
        // it waits for the first (or, were the tenant not locked, finishes before it: the owner counts below tell)
        await Promise.race([gate.waitedOnBy(pid).catch(() => undefined), secondP]);
        await gate.open();
        const [r1, r2] = await Promise.all([firstP, secondP]);
        return [r1.status, r1.body.code, r2.status, r2.body.code];
      } finally {
        await gate.release();
      }
    };
    const pair = async () => {
      const o = await signupTenant(t);
      const u = await addMember(t, o, 'owner');
      return { o, u };
    };
    // the other owner leaves, or steps down, first: the erasure then finds u the last owner
    {
      const { o, u } = await pair();
      const out = await race(`NEW.type = 'dashboard.member_left' AND NEW.target_id = '${o.userId}'`, () => as(t, o).delete(members(o, `/${o.userId}`)), () => erase(u));
      expect(out).toEqual([204, undefined, 409, 'member/last_owner']);
      expect(await owners(o.tenantId)).toBe(1);
    }
    {
      const { o, u } = await pair();
      const out = await race(`NEW.type = 'dashboard.member_role_changed' AND NEW.target_id = '${o.userId}'`, () => as(t, o).patch(members(o, `/${o.userId}`), { role: 'member' }), () => erase(u));
      expect(out).toEqual([200, undefined, 409, 'member/last_owner']);
      expect(await owners(o.tenantId)).toBe(1);
    }
    // the erasure first: the other owner's leaving or stepping down then finds them the last owner
    for (const step of ['leave', 'demote'] as const) {
      const { o, u } = await pair();
      const out = await race(`NEW.type = 'dashboard.account_deleted' AND NEW.actor_id = '${u.userId}'`, () => erase(u), () =>
        step === 'leave' ? as(t, o).delete(members(o, `/${o.userId}`)) : as(t, o).patch(members(o, `/${o.userId}`), { role: 'member' }),
      );
      expect(out).toEqual([204, undefined, 409, 'member/last_owner']);
      expect(await owners(o.tenantId)).toBe(1);
      expect(Number(await accountRows(u.userId))).toBe(0);
    }
    // the other owner removes the account's member, or demotes it, while it is erased (either first)
    {
      const { o, u } = await pair();
      const out = await race(`NEW.type = 'dashboard.account_deleted' AND NEW.actor_id = '${u.userId}'`, () => erase(u), () => as(t, o).delete(members(o, `/${u.userId}`)));
      expect(out).toEqual([204, undefined, 404, 'member/not_found']);
    }
    {
      const { o, u } = await pair();
      const out = await race(`NEW.type = 'dashboard.member_removed' AND NEW.target_id = '${u.userId}'`, () => as(t, o).delete(members(o, `/${u.userId}`)), () => erase(u));
      expect(out).toEqual([204, undefined, 204, undefined]);
      // removed, not left: the erasure had no tenant to leave
      expect(await audits('dashboard.member_left', u.userId)).toEqual([]);
      expect((await audits('dashboard.account_deleted', u.userId))[0].metadata.tenants_left).toBe(0);
      expect(Number(await accountRows(u.userId))).toBe(0);
      expect(await owners(o.tenantId)).toBe(1);
    }
    {
      const { o, u } = await pair();
      const out = await race(`NEW.type = 'dashboard.member_role_changed' AND NEW.target_id = '${u.userId}'`, () => as(t, o).patch(members(o, `/${u.userId}`), { role: 'member' }), () => erase(u));
      expect(out).toEqual([200, undefined, 204, undefined]);
      expect((await audits('dashboard.member_left', u.userId)).map((r) => r.metadata.role)).toEqual(['member']);
      expect(await owners(o.tenantId)).toBe(1);
    }
  });
});
