import { createTestApp, TestApp } from '../../setup/app';
import { agentsUrl, as, endUser, nextSecond, registerAgent, tenantOnTier } from '../agents/agents.helpers';
import { basic, exchangeBody, postToken } from '../oauth/oauth-helpers';

// issue 4 item 5 + contract "Agents and OAuth": introspection answers active:false for denylisted agents;
// kill-tokens is a denylist entry (spec 3.2 / contract) -> tokens minted before it must be inactive
describe('introspection after kill-tokens (issue 4 items 3, 5)', () => {
  let t: TestApp;
  beforeAll(async () => { t = await createTestApp(); });
  afterAll(() => t.close());

  it('an agent token minted before kill-tokens is active:false at /oauth/introspect, like on bearer routes; one minted after is active', async () => {
    const d = await tenantOnTier(t, 'pro');
    const agent = await registerAgent(t, d);
    const a = { id: agent.id as string, secret: agent.client_secret as string };
    const u = await endUser(t, d);
    const before = (await postToken(t, a, exchangeBody(u.accessToken)).expect(200)).body.access_token as string;
    const intro = (tok: string) => t.http().post('/oauth/introspect').type('form').set('Authorization', basic(a.id, a.secret)).send({ token: tok });
    expect((await intro(before).expect(200)).body.active).toBe(true);
    await as(t, d).post(agentsUrl(d, `/${a.id}/kill-tokens`)).expect((r) => { if (r.status >= 300) throw new Error(`kill ${r.status}`); });
    await t.http().get('/v1/auth/me').set('Authorization', `Bearer ${before}`).expect(401);
    expect((await intro(before).expect(200)).body).toEqual({ active: false });
    await nextSecond();
    const after = (await postToken(t, a, exchangeBody(u.accessToken)).expect(200)).body.access_token as string;
    expect((await intro(after).expect(200)).body.active).toBe(true);
  });
});
