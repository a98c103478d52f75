import { createTestApp, STRONG_PASSWORD, TestApp, uniqueEmail } from '../../setup/app';
import { createApiKey } from '../../factories/dashboard.factory';
import { agentsUrl, as, registerAgent, tenantOnTier } from '../agents/agents.helpers';
import { basic, exchangeBody } from '../oauth/oauth-helpers';

// issue 4 item 7: nothing raw (tokens, IPs, user agents, secrets) in audit rows or webhook payloads
describe('issue 4 item 7: no raw IP, user agent, token or secret stored in audit/outbox/activity rows', () => {
  let t: TestApp;
  beforeAll(async () => { t = await createTestApp(); });
  afterAll(() => t.close());

  it('a full flow leaves no raw value in any row of the database except where it is the credential store', async () => {
    const IP = '203.0.113.77';
    const UA = 'ScratchProbeAgent/9.9 (zz-unique-ua)';
    const d = await tenantOnTier(t, 'pro');
    const ow = { ...d };
    const h = () => t.http();
    await as(t, ow).post(`/v1/auth/dashboard/tenants/${d.slug}/webhooks`, { url: 'http://127.0.0.1:9/hook', events: ['*'] }).expect(201);
    const key = (await createApiKey(t, d)).key;
    await as(t, ow).patch(`/v1/auth/dashboard/tenants/${d.slug}/settings/anonymous`, { anonymous_signins_enabled: true, default_user_role: 'read_only' }).expect(200);
    const email = uniqueEmail('scan');
    const reg = await h().post('/v1/auth/register').set('X-API-Key', key).set('X-Forwarded-For', IP).set('User-Agent', UA).send({ email, password: STRONG_PASSWORD, consent: true }).expect(201);
    await h().post('/v1/auth/login').set('X-API-Key', key).set('X-Forwarded-For', IP).set('User-Agent', UA).send({ email, password: 'wrong password here!!' });
    const login = await h().post('/v1/auth/login').set('X-API-Key', key).set('X-Forwarded-For', IP).set('User-Agent', UA).send({ email, password: STRONG_PASSWORD }).expect(200);
    const g = await h().post('/v1/auth/anonymous').set('X-API-Key', key).set('X-Forwarded-For', IP).set('User-Agent', UA).send({}).expect(201);
    const claim = await h().post('/v1/auth/register').set('X-API-Key', key).set('Authorization', `Bearer ${g.body.access_token}`).set('X-Forwarded-For', IP).set('User-Agent', UA).send({ email: uniqueEmail('claim'), password: STRONG_PASSWORD, consent: true });
    expect(claim.status).toBeLessThan(300);
    const ref = await h().post('/v1/auth/refresh').set('X-API-Key', key).set('X-Forwarded-For', IP).set('User-Agent', UA).send({ refresh_token: login.body.refresh_token }).expect(200);
    // replay the rotated refresh token after the grace: reuse
    const agent = await registerAgent(t, ow);
    const a = { id: agent.id as string, secret: agent.client_secret as string };
    const ex = await h().post('/oauth/token').type('form').set('Authorization', basic(a.id, a.secret)).set('X-Forwarded-For', IP).set('User-Agent', UA).send(exchangeBody(ref.body.access_token)).expect(200);
    await h().post('/oauth/token').type('form').set('Authorization', basic(a.id, a.secret)).set('X-Forwarded-For', IP).set('User-Agent', UA).send(exchangeBody('garbage.' + reg.body.access_token));
    await h().post('/oauth/token').type('form').set('Authorization', basic(a.id, 'wrong-secret')).set('X-Forwarded-For', IP).set('User-Agent', UA).send(exchangeBody(ref.body.access_token));
    await h().get('/v1/auth/me').set('Authorization', `Bearer ${ex.body.access_token}`).set('X-Forwarded-For', IP).set('User-Agent', UA).expect(200);
    await h().post('/oauth/introspect').type('form').set('Authorization', basic(a.id, a.secret)).set('X-Forwarded-For', IP).set('User-Agent', UA).send({ token: ex.body.access_token }).expect(200);
    await h().post('/oauth/revoke').type('form').set('Authorization', basic(a.id, a.secret)).set('X-Forwarded-For', IP).set('User-Agent', UA).send({ token: ex.body.access_token }).expect(200);
    await h().delete(`/v1/users/me/agents/${a.id}`).set('Authorization', `Bearer ${ref.body.access_token}`).set('X-Forwarded-For', IP).set('User-Agent', UA).expect(200);
    await h().post(`/v1/users/me/agents/${a.id}/restore`).set('Authorization', `Bearer ${ref.body.access_token}`).set('X-Forwarded-For', IP).set('User-Agent', UA).expect(200);
    await t.http().post(`${agentsUrl(d)}/${a.id}/rotate-secret`).set('Cookie', d.cookie).set('X-CSRF-Token', d.csrf).set('X-Forwarded-For', IP).set('User-Agent', UA);
    await t.http().post(`${agentsUrl(d)}/${a.id}/kill-tokens`).set('Cookie', d.cookie).set('X-CSRF-Token', d.csrf).set('X-Forwarded-For', IP).set('User-Agent', UA);
    await t.http().delete(`${agentsUrl(d)}/${a.id}`).set('Cookie', d.cookie).set('X-CSRF-Token', d.csrf).set('X-Forwarded-For', IP).set('User-Agent', UA).expect(200);
    await h().post('/v1/auth/dashboard/login').set('X-Forwarded-For', IP).set('User-Agent', UA).send({ email: d.email, password: 'not the password!!' });
    await h().post('/v1/auth/dashboard/login').set('X-Forwarded-For', IP).set('User-Agent', UA).send({ email: d.email, password: STRONG_PASSWORD });
    await h().post('/v1/auth/logout').set('Authorization', `Bearer ${ref.body.access_token}`).set('X-Forwarded-For', IP).set('User-Agent', UA);
    await new Promise((r) => setTimeout(r, 500));

    const needles: Record<string, string> = {
      ip: IP, ua: 'zz-unique-ua', api_key: key, agent_secret: a.secret,
      access_jti_token: ref.body.access_token.split('.')[2], refresh: ref.body.refresh_token, guest_refresh: g.body.refresh_token,
      agent_token_sig: ex.body.access_token.split('.')[2],
    };
    const tables = await t.db.query<{ table_name: string }>(`SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'`);
    const hits: string[] = [];
    for (const { table_name } of tables) {
      for (const [name, v] of Object.entries(needles)) {
        const rows = await t.db.query(`SELECT 1 FROM "${table_name}" x WHERE position($1 in x::text) > 0 LIMIT 1`, [v]);
        if (rows.length) hits.push(`${table_name}:${name}`);
      }
    }
    expect(hits).toEqual([]);
  });
});
