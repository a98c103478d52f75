import { randomUUID } from 'crypto';
import { createTestApp, TestApp } from '../../setup/app';
import { expectedClientHash, plainSha256Prefix } from '../../setup/client-hash';
import { addMember, agentsUrl, as, endUser, EndUser, insertAction, registerAgent, Session, tenantOnTier } from './agents.helpers';

describe('agent activity timeline (spec 4.4, 2.10 AgentActionResponse)', () => {
  let t: TestApp;
  let owner: Session;
  let member: Session;
  let other: Session;
  let alice: EndUser;
  let bob: EndUser;
  let agent: Record<string, any>;
  const base = Date.parse('2030-01-01T00:00:00Z');
  const at = (minutes: number) => new Date(base + minutes * 60_000);
  const url = (q = '') => agentsUrl(owner, `/${agent.id}/activity${q}`);

  beforeAll(async () => {
    t = await createTestApp();
    owner = await tenantOnTier(t, 'pro');
    member = await addMember(t, owner, 'member');
    other = await tenantOnTier(t, 'pro');
    alice = await endUser(t, owner);
    bob = await endUser(t, owner);
    agent = await registerAgent(t, owner);
    // 6 exchanges for alice, 4 API calls for bob, 3 client-level actions (no end user), at known times
    for (let i = 0; i < 6; i++) await insertAction(t, { tenantId: owner.tenantId, agentId: agent.id, actorUserId: alice.userId, action: 'token_exchange', createdAt: at(i) });
    for (let i = 0; i < 4; i++) await insertAction(t, { tenantId: owner.tenantId, agentId: agent.id, actorUserId: bob.userId, action: 'api_call', createdAt: at(10 + i) });
    for (let i = 0; i < 3; i++) await insertAction(t, { tenantId: owner.tenantId, agentId: agent.id, actorUserId: null, action: 'client_credentials', createdAt: at(20 + i) });
  });
  afterAll(() => t.close());

  it('lists every action newest first for an owner, with hashed IP and user agent only', async () => {
    const res = await as(t, owner).get(url()).expect(200);
    expect(res.body.data).toHaveLength(13);
    expect(res.body.pagination).toEqual({ next_cursor: null, has_more: false });
    const times = res.body.data.map((a: { created_at: string }) => Date.parse(a.created_at));
    expect([...times].sort((x, y) => y - x)).toEqual(times);
    const first = res.body.data.find((a: { action: string }) => a.action === 'token_exchange');
    expect(first).toEqual({
      id: expect.any(String),
      action: 'token_exchange',
      actor_user_id: alice.userId,
      actor_user_email: alice.email,
      resource: 'https://api.example.test',
      method_or_event: 'POST /oauth/token',
      jti: expect.any(String),
      scope_used: 'openid email',
      // keyed (HMAC under a KEY_ENCRYPTION_KEY-derived secret), not a reversible plain SHA-256
      ip_hash_prefix: expectedClientHash('203.0.113.7'),
      user_agent_hash_prefix: expectedClientHash('agent-sdk/1.0'),
      created_at: expect.any(String),
    });
    expect(first.ip_hash_prefix).not.toBe(plainSha256Prefix('203.0.113.7'));
    expect(first.user_agent_hash_prefix).not.toBe(plainSha256Prefix('agent-sdk/1.0'));
    const client = res.body.data.find((a: { action: string }) => a.action === 'client_credentials');
    expect(client).not.toHaveProperty('actor_user_id');
    expect(JSON.stringify(res.body)).not.toContain('203.0.113.7');
    expect(JSON.stringify(res.body)).not.toContain('agent-sdk/1.0');
    for (const a of res.body.data) {
      expect(a.ip_hash_prefix).toMatch(/^[0-9a-f]{12}$/);
      expect(a.user_agent_hash_prefix).toMatch(/^[0-9a-f]{12}$/);
    }
  });

  it('pages with a cursor (default 50, max 200)', async () => {
    const p1 = await as(t, owner).get(url('?limit=5')).expect(200);
    expect(p1.body.data).toHaveLength(5);
    expect(p1.body.pagination.has_more).toBe(true);
    const seen = [...p1.body.data];
    let cursor = p1.body.pagination.next_cursor;
    while (cursor) {
      const p = await as(t, owner).get(url(`?limit=5&cursor=${encodeURIComponent(cursor)}`)).expect(200);
      seen.push(...p.body.data);
      cursor = p.body.pagination.next_cursor;
    }
    expect(seen).toHaveLength(13);
    expect(new Set(seen.map((a) => a.id)).size).toBe(13);
    await as(t, owner).get(url('?limit=200')).expect(200);
    for (const q of ['?limit=201', '?limit=0', '?limit=x', '?cursor=forged.cursor', '?other=1']) {
      const res = await as(t, owner).get(url(q)).expect(400);
      expect(['request/invalid', 'request/invalid_cursor']).toContain(res.body.code);
    }
  });

  it('uses 50 as the default page size', async () => {
    const a = await registerAgent(t, owner);
    for (let i = 0; i < 52; i++) await insertAction(t, { tenantId: owner.tenantId, agentId: a.id, actorUserId: null, createdAt: at(i) });
    const res = await as(t, owner).get(agentsUrl(owner, `/${a.id}/activity`)).expect(200);
    expect(res.body.data).toHaveLength(50);
    expect(res.body.pagination.has_more).toBe(true);
  });

  it('filters by since (inclusive), until (exclusive), actor_user_id and action_type', async () => {
    const since = await as(t, owner).get(url(`?since=${at(10).toISOString()}`)).expect(200);
    expect(since.body.data).toHaveLength(7);
    const until = await as(t, owner).get(url(`?until=${encodeURIComponent('2030-01-01T00:10:00+00:00')}`)).expect(200);
    expect(until.body.data).toHaveLength(6);
    const window = await as(t, owner).get(url(`?since=${at(2).toISOString()}&until=${at(12).toISOString()}`)).expect(200);
    expect(window.body.data).toHaveLength(6);
    const byUser = await as(t, owner).get(url(`?actor_user_id=${bob.userId}`)).expect(200);
    expect(byUser.body.data).toHaveLength(4);
    expect(byUser.body.data.every((a: { actor_user_id: string }) => a.actor_user_id === bob.userId)).toBe(true);
    const byType = await as(t, owner).get(url('?action_type=token_exchange')).expect(200);
    expect(byType.body.data).toHaveLength(6);
    const both = await as(t, owner).get(url(`?action_type=token_exchange&actor_user_id=${bob.userId}`)).expect(200);
    expect(both.body.data).toHaveLength(0);
    const paged = await as(t, owner).get(url(`?actor_user_id=${alice.userId}&limit=4`)).expect(200);
    const rest = await as(t, owner).get(url(`?actor_user_id=${alice.userId}&limit=4&cursor=${encodeURIComponent(paged.body.pagination.next_cursor)}`)).expect(200);
    expect(paged.body.data.length + rest.body.data.length).toBe(6);
    for (const q of ['?since=yesterday', '?until=2030-01-01', '?since=2030-13-01T00:00:00Z', '?actor_user_id=nope', `?since=${at(5).toISOString()}&until=${at(1).toISOString()}`, `?action_type=${'x'.repeat(65)}`]) {
      expect((await as(t, owner).get(url(q)).expect(400)).body.code).toBe('request/invalid');
    }
    // dates that no calendar has are refused by validation, naming the field (not by PostgreSQL)
    for (const [q, field] of [
      ['?since=2026-02-30T00:00:00Z', 'since'],
      ['?until=2026-04-31T10:00:00%2B02:00', 'until'],
      ['?since=0000-01-01T00:00:00Z', 'since'],
      ['?since=2026-01-01T24:00:00Z', 'since'],
      ['?until=2026-01-01T10:00:60Z', 'until'],
    ]) {
      const res = await as(t, owner).get(url(q)).expect(400);
      expect(res.body).toMatchObject({ code: 'request/invalid', errors: [expect.objectContaining({ field })] });
    }
    expect((await as(t, owner).get(url('?since=2024-02-29T23:59:59.5%2B05:30')).expect(200)).body.data).toEqual(expect.any(Array));
    // RFC 3339 5.6 allows a space for the T (its note) and any number of fraction digits
    await as(t, owner).get(url('?since=2024-02-29%2023:59:59.1234567890Z')).expect(200);
    // and offsets up to ±23:59, beyond what PostgreSQL reads (±15:59): the same instants as above
    expect((await as(t, owner).get(url(`?since=${encodeURIComponent('2030-01-01T16:10:00+16:00')}`)).expect(200)).body.data).toHaveLength(7);
    expect((await as(t, owner).get(url(`?until=${encodeURIComponent('2029-12-31T05:40:00.000-18:30')}`)).expect(200)).body.data).toHaveLength(6);
    // an offset that moves the instant out of years 1-9999: before or after every action
    expect((await as(t, owner).get(url(`?since=${encodeURIComponent('0001-01-01T00:00:00+16:00')}&until=${encodeURIComponent('9999-12-31T23:59:59-23:59')}`)).expect(200)).body.data).toHaveLength(13);
    // U+0000 in a query value is refused as in a body, before anything reaches PostgreSQL
    const nul = await as(t, owner).get(url('?action_type=token%00exchange')).expect(400);
    expect(nul.body).toMatchObject({ code: 'request/invalid', errors: [{ field: 'action_type', message: expect.stringContaining('U+0000') }] });
  });

  it('shows a member only the actions without an acting end user; filtering by a user is 403 for members', async () => {
    const res = await as(t, member).get(url()).expect(200);
    expect(res.body.data).toHaveLength(3);
    expect(res.body.data.every((a: Record<string, unknown>) => a.action === 'client_credentials' && !('actor_user_id' in a) && !('actor_user_email' in a))).toBe(true);
    const typed = await as(t, member).get(url('?action_type=token_exchange')).expect(200);
    expect(typed.body.data).toHaveLength(0);
    const denied = await as(t, member).get(url(`?actor_user_id=${alice.userId}`)).expect(403);
    expect(denied.body.code).toBe('auth/forbidden');
  });

  it('is 404 for another tenant’s agent and never leaks its actions', async () => {
    const theirs = await registerAgent(t, other);
    await insertAction(t, { tenantId: other.tenantId, agentId: theirs.id, actorUserId: null });
    expect((await as(t, owner).get(agentsUrl(owner, `/${theirs.id}/activity`)).expect(404)).body.code).toBe('agent/not_found');
    expect((await as(t, other).get(agentsUrl(other, `/${agent.id}/activity`)).expect(404)).body.code).toBe('agent/not_found');
    expect((await as(t, other).get(agentsUrl(other, `/${theirs.id}/activity`)).expect(200)).body.data).toHaveLength(1);
    // a member filtering by a user: 404 too, never the owner-only 403 (spec 1: cross-tenant is 404, never 403)
    for (const id of [theirs.id, randomUUID()]) {
      expect((await as(t, member).get(agentsUrl(owner, `/${id}/activity?actor_user_id=${alice.userId}`)).expect(404)).body.code).toBe('agent/not_found');
    }
  });

  it('stays readable after the agent is revoked', async () => {
    const a = await registerAgent(t, owner);
    await insertAction(t, { tenantId: owner.tenantId, agentId: a.id, actorUserId: alice.userId });
    await as(t, owner).delete(agentsUrl(owner, `/${a.id}`)).expect(200);
    expect((await as(t, owner).get(agentsUrl(owner, `/${a.id}/activity`)).expect(200)).body.data).toHaveLength(1);
  });
});
