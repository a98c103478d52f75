import { signupTenant } from '../../factories/dashboard.factory';
import { createTestApp, STRONG_PASSWORD, TestApp } from '../../setup/app';
import { addMember, as, Session } from '../agents/agents.helpers';

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
    expect(me.body.memberships).toEqual([{ tenant_slug: elsewhere.slug, role: 'member' }]);
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
