import { createHash } from 'crypto';
import { createTestApp, TestApp } from '../../setup/app';
import {
  addMember,
  agentsUrl,
  as,
  CIBA,
  CLIENT_CREDENTIALS,
  DEVICE_CODE,
  registerAgent,
  Session,
  tenantOnTier,
  TOKEN_EXCHANGE,
} from './agents.helpers';

const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');
const RATE_KEYS = ['token_exchange_per_min', 'ciba_initiate_per_min', 'device_code_per_min', 'client_credentials_per_min', 'api_calls_per_min'];

describe('agents API, tenant admin (spec 4.4, 2.10, 5 rules 2-4, 7.4)', () => {
  let t: TestApp;
  let owner: Session;
  let member: Session;
  let other: Session;
  beforeAll(async () => {
    t = await createTestApp();
    owner = await tenantOnTier(t, 'pro');
    member = await addMember(t, owner, 'member');
    other = await tenantOnTier(t, 'enterprise');
  });
  afterAll(() => t.close());

  const audits = (type: string, agentId: string) => t.db.query(`SELECT * FROM audit_events WHERE type = $1 AND target_id = $2`, [type, agentId]);
  const webhooks = (type: string, agentId: string) =>
    t.db.query<{ payload: Record<string, unknown> }>(`SELECT payload FROM outbox WHERE topic = 'webhook' AND event_type = $1 AND payload->>'agent_client_id' = $2`, [type, agentId]);

  describe('register', () => {
    it('answers 201 AgentResponse plus client_secret once; only its SHA-256 is stored', async () => {
      const res = await as(t, owner)
        .post(agentsUrl(owner), {
          name: 'Calendar agent',
          description: 'Books meetings',
          agent_class: 'mcp-server',
          scopes: ['openid', 'calendar.read'],
          grant_types: [TOKEN_EXCHANGE],
          agent_token_max_ttl_sec: 600,
          agent_settings: { rate_limits: { token_exchange_per_min: 120 }, max_concurrent_tokens: 5 },
          redirect_uris: [],
        })
        .expect(201);
      expect(res.body).toEqual({
        id: expect.stringMatching(/^[0-9a-f-]{36}$/),
        client_id: res.body.id,
        client_type: 'agent',
        name: 'Calendar agent',
        description: 'Books meetings',
        agent_class: 'mcp-server',
        logo_url: null,
        scopes: ['openid', 'calendar.read'],
        grant_types: [TOKEN_EXCHANGE],
        redirect_uris: [],
        agent_token_max_ttl_sec: 600,
        agent_settings: { rate_limits: { token_exchange_per_min: 120 }, max_concurrent_tokens: 5 },
        agent_metadata_version: 1,
        created_at: expect.any(String),
        updated_at: expect.any(String),
        disabled_at: null,
        revoked_at: null,
        client_secret: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
      });
      const [row] = await t.db.query<Record<string, unknown>>(`SELECT * FROM agent_clients WHERE id = $1`, [res.body.id]);
      expect(row.secret_hash).toBe(sha256(res.body.client_secret));
      expect(JSON.stringify(row)).not.toContain(res.body.client_secret);
      const got = await as(t, owner).get(agentsUrl(owner, `/${res.body.id}`)).expect(200);
      expect(got.body).not.toHaveProperty('client_secret');
      const { client_secret: _s, ...rest } = res.body;
      expect(got.body).toEqual(rest);
      const [audit] = await audits('agent.registered', res.body.id);
      expect(JSON.stringify(audit)).not.toContain(res.body.client_secret);
    });

    it('fills the defaults: token-exchange grant, TTL 900, no scopes', async () => {
      const res = await as(t, owner).post(agentsUrl(owner), { name: 'Minimal' }).expect(201);
      expect(res.body).toMatchObject({ grant_types: [TOKEN_EXCHANGE], agent_token_max_ttl_sec: 900, scopes: [], agent_settings: { rate_limits: {}, max_concurrent_tokens: null } });
    });

    it('refuses the free tier with 403 agent/tier_unauthorized (spec 5 rule 3); Pro and Enterprise may', async () => {
      const free = await tenantOnTier(t, 'free');
      const res = await as(t, free).post(agentsUrl(free), { name: 'x' }).expect(403);
      expect(res.body).toMatchObject({ status: 403, code: 'agent/tier_unauthorized' });
      expect(res.headers['content-type']).toMatch(/application\/problem\+json/);
      // the tier gate comes before the 422s of the body
      expect((await as(t, free).post(agentsUrl(free), { name: 'x', grant_types: ['password'] }).expect(403)).body.code).toBe('agent/tier_unauthorized');
      expect(await t.db.query(`SELECT 1 FROM agent_clients WHERE tenant_id = $1`, [free.tenantId])).toHaveLength(0);
      await registerAgent(t, other);
    });

    it('accepts every grant type of the 7.4 allowlist, and refuses any other with 422 agent/invalid_grant_type', async () => {
      const ok = await registerAgent(t, owner, { grant_types: [TOKEN_EXCHANGE, CIBA, DEVICE_CODE, CLIENT_CREDENTIALS] });
      expect(ok.grant_types).toEqual([TOKEN_EXCHANGE, CIBA, DEVICE_CODE, CLIENT_CREDENTIALS]);
      for (const g of ['authorization_code', 'password', 'refresh_token', 'implicit', 'urn:ietf:params:oauth:grant-type:jwt-bearer', 'TOKEN-EXCHANGE', '', 'g'.repeat(201)]) {
        const res = await as(t, owner).post(agentsUrl(owner), { name: 'bad', grant_types: [TOKEN_EXCHANGE, g] }).expect(422);
        expect(res.body).toMatchObject({ status: 422, code: 'agent/invalid_grant_type' });
      }
      // one errors[] entry per refused item, at its position
      const two = await as(t, owner).post(agentsUrl(owner), { name: 'bad', grant_types: ['password', TOKEN_EXCHANGE, 'implicit'] }).expect(422);
      expect(two.body.errors.map((e: { field: string }) => e.field)).toEqual(['grant_types.0', 'grant_types.2']);
      for (const grant_types of ['client_credentials', [1], [TOKEN_EXCHANGE, TOKEN_EXCHANGE], null, []]) {
        expect((await as(t, owner).post(agentsUrl(owner), { name: 'bad', grant_types }).expect(400)).body.code).toBe('request/invalid');
      }
    });

    it('refuses non-empty redirect_uris with 422 agent/invalid_field (agents are headless)', async () => {
      const res = await as(t, owner).post(agentsUrl(owner), { name: 'bad', redirect_uris: ['https://app.example.com/cb'] }).expect(422);
      expect(res.body).toMatchObject({ status: 422, code: 'agent/invalid_field', errors: [{ field: 'redirect_uris', message: expect.any(String) }] });
      await registerAgent(t, owner, { redirect_uris: [] });
      expect((await as(t, owner).post(agentsUrl(owner), { name: 'bad', redirect_uris: 'https://x' }).expect(400)).body.code).toBe('request/invalid');
    });

    it('enforces agent_token_max_ttl_sec 60-900', async () => {
      expect((await registerAgent(t, owner, { agent_token_max_ttl_sec: 60 })).agent_token_max_ttl_sec).toBe(60);
      expect((await registerAgent(t, owner, { agent_token_max_ttl_sec: 900 })).agent_token_max_ttl_sec).toBe(900);
      for (const v of [59, 901, 0, -1, 300.5, '300', null]) {
        const res = await as(t, owner).post(agentsUrl(owner), { name: 'bad', agent_token_max_ttl_sec: v }).expect(400);
        expect(res.body.code).toBe('request/invalid');
        expect(res.body.errors.map((e: { field: string }) => e.field)).toContain('agent_token_max_ttl_sec');
      }
    });

    it('accepts the five rate-limit keys of 2.10 up to the ceiling 600 and refuses anything else', async () => {
      const all = Object.fromEntries(RATE_KEYS.map((k) => [k, 600]));
      expect((await registerAgent(t, owner, { agent_settings: { rate_limits: all } })).agent_settings.rate_limits).toEqual(all);
      const ones = Object.fromEntries(RATE_KEYS.map((k) => [k, 1]));
      expect((await registerAgent(t, owner, { agent_settings: { rate_limits: ones } })).agent_settings.rate_limits).toEqual(ones);
      const bad = [
        ...RATE_KEYS.map((k) => ({ rate_limits: { [k]: 601 } })),
        ...RATE_KEYS.map((k) => ({ rate_limits: { [k]: 0 } })),
        { rate_limits: { token_exchange_per_min: 10.5 } },
        { rate_limits: { token_exchange_per_min: '60' } },
        { rate_limits: { logins_per_min: 10 } },
        { rate_limits: 'fast' },
        { rate_limits: null },
        { max_concurrent_tokens: 0 },
        { max_concurrent_tokens: 'many' },
        { burst: 5 },
      ];
      for (const agent_settings of [...bad, 'x', null]) {
        const res = await as(t, owner).post(agentsUrl(owner), { name: 'bad', agent_settings }).expect(400);
        expect(res.body.code).toBe('request/invalid');
        expect(res.body.errors[0].field).toMatch(/^agent_settings/);
      }
    });

    it('refuses bad names, scopes, descriptions, logo URLs and unknown properties with 400 request/invalid', async () => {
      const bodies: object[] = [
        {},
        { name: '' },
        { name: 'x'.repeat(101) },
        { name: 42 },
        { name: '\u200b\u2060' },
        { name: 'agent\r\nX-Injected: 1' },
        { name: 'ok', scopes: 'openid' },
        { name: 'ok', scopes: ['has space'] },
        { name: 'ok', scopes: ['dup', 'dup'] },
        { name: 'ok', scopes: [''] },
        { name: 'ok', scopes: null },
        { name: 'ok', description: 'x'.repeat(1001) },
        { name: 'ok', agent_class: '' },
        { name: 'ok', logo_url: 'javascript:alert(1)' },
        { name: 'ok', client_secret: 'mine' },
        { name: 'ok', client_type: 'public' },
        { name: 'ok', tenant_id: other.tenantId },
      ];
      for (const body of bodies) {
        const res = await as(t, owner).post(agentsUrl(owner), body).expect(400);
        expect(res.body.code).toBe('request/invalid');
      }
      // the message names the bound the scope broke (the array's own length is not the scope's)
      const long = await as(t, owner).post(agentsUrl(owner), { name: 'ok', scopes: ['openid', 's'.repeat(129)] }).expect(400);
      expect(long.body.errors).toEqual([{ field: 'scopes', message: 'each value in scopes must be shorter than or equal to 128 characters' }]);
      await as(t, owner).post(agentsUrl(owner), { name: 'ok', scopes: ['s'.repeat(128)] }).expect(201);
    });

    it('logo_url (loaded by every end user\'s browser) is https to a public host without credentials or fragment, on create and PATCH', async () => {
      const own = await tenantOnTier(t, 'pro'); // a session of its own: the write limit of the shared one is counted
      const bad = [
        'http://cdn.example.com/l.png',
        'https://u:p@cdn.example.com/l.png',
        'https://127.0.0.1/l.png',
        'https://[::1]/l.png',
        'https://10.0.0.5/l.png',
        'https://localhost/l.png',
        'https://intranet/l.png',
        'https://cdn.example.com/l.png#x',
        // the URL parser drops or rewrites these: the string checked would not be the one loaded
        ' https://cdn.example.com/l.png',
        'https://cdn.exa\nmple.com/l.png',
        '\u0001https://cdn.example.com/l.png',
        'https://cdn.example.com/l\u202egnp.png',
        'https://cdn.example.com/l\u200b.png',
        'https:\\\\cdn.example.com\\l.png',
        'https://cdn.example.com/l.png\t',
        `https://cdn.example.com/${'é'.repeat(400)}`, // 2,048 characters at most once percent-encoded
      ];
      for (const logo_url of bad) {
        const res = await as(t, own).post(agentsUrl(own), { name: 'ok', logo_url }).expect(400);
        expect(res.body).toMatchObject({ code: 'request/invalid', errors: [expect.objectContaining({ field: 'logo_url' })] });
      }
      const agent = await registerAgent(t, own, { logo_url: 'https://cdn.example.com/l.png' });
      expect((await as(t, own).patch(agentsUrl(own, `/${agent.id}`), { logo_url: 'https://192.168.0.1/l.png' }).expect(400)).body.code).toBe('request/invalid');
      expect((await as(t, own).patch(agentsUrl(own, `/${agent.id}`), { logo_url: 'https://93.184.216.34/l.png' }).expect(200)).body.logo_url).toBe('https://93.184.216.34/l.png');
      // stored and shown as the URL parser spells it: percent-encoded, host lower-cased, so no
      // quote or angle bracket reaches a page that puts it in an attribute
      const odd = 'HTTPS://CDN.Example.com/a"><img/src=x/onerror=alert(1)>/é.png';
      const canonical = 'https://cdn.example.com/a%22%3E%3Cimg/src=x/onerror=alert(1)%3E/%C3%A9.png';
      expect((await as(t, own).patch(agentsUrl(own, `/${agent.id}`), { logo_url: odd }).expect(200)).body.logo_url).toBe(canonical);
      expect((await as(t, own).get(agentsUrl(own, `/${agent.id}`)).expect(200)).body.logo_url).toBe(canonical);
      expect((await as(t, own).post(agentsUrl(own), { name: 'odd logo', logo_url: odd }).expect(201)).body.logo_url).toBe(canonical);
    });

    it('agent_class (shown to end users) is printable as names are; a description may span lines and hold tabs, no other controls; PATCH by the same rules', async () => {
      const own = await tenantOnTier(t, 'pro'); // a session of its own: the write limit of the shared one is counted
      for (const body of [
        { name: 'ok', agent_class: 'Official\u202e revo' },
        { name: 'ok', agent_class: 'mcp\u001b[31m' },
        { name: 'ok', agent_class: '\u200b' },
        { name: 'ok', description: 'x\u0008y' },
        { name: 'ok', description: 'pay \u2066me\u2069' },
      ]) {
        const res = await as(t, own).post(agentsUrl(own), body).expect(400);
        expect(res.body).toMatchObject({ code: 'request/invalid', errors: [{ field: Object.keys(body)[1] }] });
      }
      const a = await as(t, own).post(agentsUrl(own), { name: 'ok', description: 'reads mail\n\tand drafts replies\r\n', agent_class: 'mcp server \u{1F916}' }).expect(201);
      expect(a.body).toMatchObject({ description: 'reads mail\n\tand drafts replies\r\n', agent_class: 'mcp server \u{1F916}' });
      for (const body of [{ agent_class: 'a\u202eb' }, { description: 'a\u0000b' }]) {
        expect((await as(t, own).patch(agentsUrl(own, `/${a.body.id}`), body).expect(400)).body.code).toBe('request/invalid');
      }
    });

    it('is for owners only: a member gets 403 auth/forbidden; CSRF and session are required', async () => {
      const res = await as(t, member).post(agentsUrl(owner), { name: 'x' }).expect(403);
      expect(res.body.code).toBe('auth/forbidden');
      await t.http().post(agentsUrl(owner)).set('Cookie', owner.cookie).send({ name: 'x' }).expect(403);
      await t.http().post(agentsUrl(owner)).send({ name: 'x' }).expect(401);
    });
  });

  describe('list', () => {
    it('pages newest first with an opaque cursor (default 20, max 100), excludes revoked unless include_revoked', async () => {
      const d = await tenantOnTier(t, 'pro');
      const ids: string[] = [];
      for (let i = 0; i < 23; i++) ids.push((await registerAgent(t, d, { name: `a${i}` })).id);
      const p1 = await as(t, d).get(agentsUrl(d)).expect(200);
      expect(p1.body.data).toHaveLength(20);
      expect(p1.body.pagination).toEqual({ next_cursor: expect.any(String), has_more: true });
      expect(p1.body.data[0].name).toBe('a22');
      const p2 = await as(t, d).get(`${agentsUrl(d)}?cursor=${encodeURIComponent(p1.body.pagination.next_cursor)}`).expect(200);
      expect(p2.body.data.map((a: { name: string }) => a.name)).toEqual(['a2', 'a1', 'a0']);
      expect(p2.body.pagination).toEqual({ next_cursor: null, has_more: false });
      expect(JSON.stringify([p1.body, p2.body])).not.toMatch(/client_secret|secret_hash/);

      await as(t, d).delete(agentsUrl(d, `/${ids[0]}`)).expect(200);
      await as(t, d).delete(agentsUrl(d, `/${ids[1]}`)).expect(200);
      const all = await as(t, d).get(`${agentsUrl(d)}?limit=100`).expect(200);
      expect(all.body.data).toHaveLength(21);
      expect(all.body.data.map((a: { id: string }) => a.id)).not.toContain(ids[0]);
      const withRevoked = await as(t, d).get(`${agentsUrl(d)}?limit=100&include_revoked=true`).expect(200);
      expect(withRevoked.body.data).toHaveLength(23);
      expect(withRevoked.body.data.find((a: { id: string }) => a.id === ids[0]).revoked_at).toEqual(expect.any(String));
      expect((await as(t, d).get(`${agentsUrl(d)}?limit=100&include_revoked=false`).expect(200)).body.data).toHaveLength(21);
      const small = await as(t, d).get(`${agentsUrl(d)}?limit=5&include_revoked=true`).expect(200);
      expect(small.body.data).toHaveLength(5);

      for (const q of ['limit=0', 'limit=101', 'limit=abc', 'include_revoked=yes', 'unknown=1']) {
        expect((await as(t, d).get(`${agentsUrl(d)}?${q}`).expect(400)).body.code).toBe('request/invalid');
      }
      const tampered = p1.body.pagination.next_cursor.replace(/^./, (c: string) => (c === 'A' ? 'B' : 'A'));
      expect((await as(t, d).get(`${agentsUrl(d)}?cursor=${encodeURIComponent(tampered)}`).expect(400)).body.code).toBe('request/invalid_cursor');
      // a valid cursor with anything appended is tampered too
      for (const extra of ['.x', `.${p1.body.pagination.next_cursor.split('.')[1]}`]) {
        const appended = `${p1.body.pagination.next_cursor}${extra}`;
        expect((await as(t, d).get(`${agentsUrl(d)}?cursor=${encodeURIComponent(appended)}`).expect(400)).body.code).toBe('request/invalid_cursor');
      }
    });

    it('lists only the tenant’s own agents; members may read', async () => {
      const mine = await registerAgent(t, owner, { name: 'mine' });
      const theirs = await registerAgent(t, other, { name: 'theirs' });
      const res = await as(t, member).get(`${agentsUrl(owner)}?limit=100`).expect(200);
      const ids = res.body.data.map((a: { id: string }) => a.id);
      expect(ids).toContain(mine.id);
      expect(ids).not.toContain(theirs.id);
      await as(t, member).get(agentsUrl(owner, `/${mine.id}`)).expect(200);
    });
  });

  describe('PATCH', () => {
    it('updates only the given fields and bumps agent_metadata_version each time', async () => {
      const a = await registerAgent(t, owner, { description: 'first', agent_settings: { rate_limits: { api_calls_per_min: 100 }, max_concurrent_tokens: 3 } });
      const r1 = await as(t, owner).patch(agentsUrl(owner, `/${a.id}`), { name: 'Renamed' }).expect(200);
      expect(r1.body).toMatchObject({ name: 'Renamed', description: 'first', scopes: a.scopes, agent_metadata_version: 2 });
      const r2 = await as(t, owner)
        .patch(agentsUrl(owner, `/${a.id}`), {
          description: null,
          scopes: ['openid'],
          agent_token_max_ttl_sec: 120,
          agent_settings: { rate_limits: { token_exchange_per_min: 600 } },
          logo_url: 'https://cdn.example.com/logo.png',
        })
        .expect(200);
      expect(r2.body).toMatchObject({
        name: 'Renamed',
        description: null,
        scopes: ['openid'],
        agent_token_max_ttl_sec: 120,
        logo_url: 'https://cdn.example.com/logo.png',
        agent_settings: { rate_limits: { token_exchange_per_min: 600 }, max_concurrent_tokens: 3 },
        agent_metadata_version: 3,
      });
      const r3 = await as(t, owner).patch(agentsUrl(owner, `/${a.id}`), {}).expect(200);
      expect(r3.body.agent_metadata_version).toBe(4);
      expect((await as(t, owner).get(agentsUrl(owner, `/${a.id}`)).expect(200)).body.agent_metadata_version).toBe(4);
      expect(await audits('agent.updated', a.id)).toHaveLength(3);
    });

    it('applies the registration constraints (422 for grant types and redirect_uris, 400 otherwise), changing nothing', async () => {
      const a = await registerAgent(t, owner);
      const url = agentsUrl(owner, `/${a.id}`);
      expect((await as(t, owner).patch(url, { grant_types: ['password'] }).expect(422)).body.code).toBe('agent/invalid_grant_type');
      expect((await as(t, owner).patch(url, { redirect_uris: ['https://x.example.com'] }).expect(422)).body.code).toBe('agent/invalid_field');
      for (const body of [
        { name: '' },
        { name: null },
        { name: ' \u00a0 ' },
        { scopes: null },
        { agent_token_max_ttl_sec: 901 },
        { agent_token_max_ttl_sec: 59 },
        { agent_settings: { rate_limits: { api_calls_per_min: 601 } } },
        { agent_settings: { rate_limits: { other_per_min: 1 } } },
        { agent_settings: { rate_limits: { toString: 1 } } },
        { agent_settings: { valueOf: 1 } },
        { secret_hash: 'x' },
        { revoked_at: null },
        { agent_metadata_version: 9 },
        // clearing the grant types is the disable action's (one way, one client_disabled event)
        { grant_types: [] },
      ]) {
        expect((await as(t, owner).patch(url, body).expect(400)).body.code).toBe('request/invalid');
      }
      expect((await as(t, owner).get(url).expect(200)).body.agent_metadata_version).toBe(1);
    });

    it('is for owners only', async () => {
      const a = await registerAgent(t, owner);
      expect((await as(t, member).patch(agentsUrl(owner, `/${a.id}`), { name: 'x' }).expect(403)).body.code).toBe('auth/forbidden');
    });
  });

  describe('rotate-secret', () => {
    it('reveals a new secret once and stores only its hash; the old hash is gone', async () => {
      const a = await registerAgent(t, owner);
      const res = await as(t, owner).post(agentsUrl(owner, `/${a.id}/rotate-secret`)).expect(200);
      expect(res.body).toMatchObject({ id: a.id, client_secret: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/) });
      expect(res.body.client_secret).not.toBe(a.client_secret);
      const [row] = await t.db.query<{ secret_hash: string }>(`SELECT secret_hash FROM agent_clients WHERE id = $1`, [a.id]);
      expect(row.secret_hash).toBe(sha256(res.body.client_secret));
      expect(await audits('agent.secret_rotated', a.id)).toHaveLength(1);
      expect((await as(t, member).post(agentsUrl(owner, `/${a.id}/rotate-secret`)).expect(403)).body.code).toBe('auth/forbidden');
    });
  });

  describe('disable (spec 3.2: active, grant types cleared)', () => {
    it('clears the grant types, emits oauth.token_exchange.client_disabled (audit + webhook) once; a PATCH of grant_types enables it again', async () => {
      const a = await registerAgent(t, owner, { grant_types: [TOKEN_EXCHANGE, CIBA] });
      const url = agentsUrl(owner, `/${a.id}/disable`);
      expect((await as(t, member).post(url).expect(403)).body.code).toBe('auth/forbidden');
      const res = await as(t, owner).post(url).expect(200);
      expect(res.body).toMatchObject({ id: a.id, grant_types: [], disabled_at: expect.any(String), revoked_at: null });
      const again = await as(t, owner).post(url).expect(200);
      expect(again.body.disabled_at).toBe(res.body.disabled_at);
      const [audit] = await audits('oauth.token_exchange.client_disabled', a.id);
      expect(audit).toMatchObject({ tenant_id: owner.tenantId, actor_type: 'dashboard_user', actor_id: owner.userId });
      expect(audit.metadata).toMatchObject({ agent_client_id: a.id, previous_grant_types: [TOKEN_EXCHANGE, CIBA] });
      expect(await audits('oauth.token_exchange.client_disabled', a.id)).toHaveLength(1);
      const hooks = await webhooks('oauth.token_exchange.client_disabled', a.id);
      expect(hooks).toHaveLength(1);
      expect(hooks[0].payload).toMatchObject({ agent_client_id: a.id });
      // still listed as active (spec 3.2)
      const list = await as(t, owner).get(`${agentsUrl(owner)}?limit=100`).expect(200);
      expect(list.body.data.map((x: { id: string }) => x.id)).toContain(a.id);
      const enabled = await as(t, owner).patch(agentsUrl(owner, `/${a.id}`), { grant_types: [TOKEN_EXCHANGE] }).expect(200);
      expect(enabled.body).toMatchObject({ grant_types: [TOKEN_EXCHANGE], disabled_at: null });
    });
  });

  describe('kill-tokens', () => {
    it('adds a tokens_killed denylist entry valid for agent_token_max_ttl_sec and emits oauth.token_exchange.revocation_requested', async () => {
      const a = await registerAgent(t, owner, { agent_token_max_ttl_sec: 300 });
      const url = agentsUrl(owner, `/${a.id}/kill-tokens`);
      expect((await as(t, member).post(url).expect(403)).body.code).toBe('auth/forbidden');
      const res = await as(t, owner).post(url).expect(200);
      expect(res.body).toEqual({ id: a.id, not_before: expect.any(String), denylisted_until: expect.any(String) });
      expect(Date.parse(res.body.denylisted_until) - Date.parse(res.body.not_before)).toBe(300_000);
      const rows = await t.db.query(`SELECT reason FROM agent_denylist WHERE agent_client_id = $1`, [a.id]);
      expect(rows).toEqual([{ reason: 'tokens_killed' }]);
      expect(await audits('oauth.token_exchange.revocation_requested', a.id)).toHaveLength(1);
      expect(await webhooks('oauth.token_exchange.revocation_requested', a.id)).toHaveLength(1);
      // not revoked
      expect((await as(t, owner).get(agentsUrl(owner, `/${a.id}`)).expect(200)).body.revoked_at).toBeNull();
    });
  });

  describe('tenant isolation (spec 1, 7.4: cross-tenant 404 with the same body as an unknown id)', () => {
    it('answers 404 agent/not_found on every route for another tenant’s agent, an unknown id and a malformed id', async () => {
      const theirs = await registerAgent(t, other);
      const routes: [keyof ReturnType<typeof as>, string, object?][] = [
        ['get', ''],
        ['patch', '', { name: 'hijack' }],
        ['post', '/rotate-secret'],
        ['delete', ''],
        ['post', '/disable'],
        ['post', '/kill-tokens'],
        ['get', '/activity'],
      ];
      for (const [method, suffix, body] of routes) {
        const call = (id: string) => {
          const c = as(t, owner);
          const url = agentsUrl(owner, `/${id}${suffix}`);
          return method === 'patch' ? c.patch(url, body!) : method === 'post' ? c.post(url, body) : c[method](url);
        };
        const cross = await call(theirs.id).expect(404);
        const unknown = await call('00000000-0000-4000-8000-000000000000').expect(404);
        const malformed = await call('not-a-uuid').expect(404);
        expect(cross.body.code).toBe('agent/not_found');
        const strip = (b: Record<string, unknown>) => ({ ...b, request_id: undefined });
        expect(strip(unknown.body)).toEqual(strip(cross.body));
        expect(strip(malformed.body)).toEqual(strip(cross.body));
      }
      // nothing changed on the other tenant's agent
      const still = await as(t, other).get(agentsUrl(other, `/${theirs.id}`)).expect(200);
      expect(still.body).toMatchObject({ name: theirs.name, revoked_at: null, disabled_at: null, agent_metadata_version: 1, grant_types: theirs.grant_types });
      expect(await t.db.query(`SELECT 1 FROM agent_denylist WHERE agent_client_id = $1`, [theirs.id])).toHaveLength(0);
    });

    it('answers 404 tenant/not_found for a slug the session is no member of', async () => {
      const theirs = await registerAgent(t, other);
      expect((await as(t, owner).get(agentsUrl(other)).expect(404)).body.code).toBe('tenant/not_found');
      expect((await as(t, owner).get(agentsUrl(other, `/${theirs.id}`)).expect(404)).body.code).toBe('tenant/not_found');
      expect((await as(t, owner).delete(agentsUrl(other, `/${theirs.id}`)).expect(404)).body.code).toBe('tenant/not_found');
      expect((await as(t, owner).post(agentsUrl(other), { name: 'x' }).expect(404)).body.code).toBe('tenant/not_found');
    });
  });

  it('documents every agents route in the generated OpenAPI document', async () => {
    const doc = (await t.http().get('/openapi.json').expect(200)).body;
    const base = '/v1/auth/dashboard/tenants/{slug}/agents';
    for (const [path, methods] of [
      [base, ['get', 'post']],
      [`${base}/{agentId}`, ['get', 'patch', 'delete']],
      [`${base}/{agentId}/rotate-secret`, ['post']],
      [`${base}/{agentId}/disable`, ['post']],
      [`${base}/{agentId}/kill-tokens`, ['post']],
      [`${base}/{agentId}/activity`, ['get']],
      ['/v1/users/me/agents', ['get']],
      ['/v1/users/me/agents/{agentClientId}', ['delete']],
      ['/v1/users/me/agents/{agentClientId}/restore', ['post']],
      ['/v1/auth/dashboard/tenants/{slug}/oauth-clients', ['get', 'post']],
    ] as const) {
      for (const m of methods) expect(doc.paths[path]?.[m]).toBeDefined();
    }
    expect(doc.components.schemas.RegisterAgentRequestDto.properties.agent_token_max_ttl_sec).toMatchObject({ minimum: 60, maximum: 900 });
  });
});
