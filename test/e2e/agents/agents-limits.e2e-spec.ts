import { createTestApp, TestApp } from '../../setup/app';
import { agentsUrl, as, endUser, registerAgent, tenantOnTier } from './agents.helpers';

// spec 8: agents API writes are governed by RATE_LIMIT_AUTH_WRITE_MAX, reads and activity by
// RATE_LIMIT_AUTH_READ_MAX (per dashboard session, or per end user on /v1/users/me/agents)
describe('agents API limits (spec 8, 7.1)', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp({ RATE_LIMIT_AUTH_WRITE_MAX: '4', RATE_LIMIT_AUTH_READ_MAX: '6' });
  });
  afterAll(() => t.close());

  const expect429 = (res: { status: number; headers: Record<string, string> }) => {
    expect(res.status).toBe(429);
    expect(Number(res.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(res.headers['x-service-docs']).toEqual(expect.any(String));
  };

  it('answers 429 with Retry-After and X-Service-Docs past the write limit of a dashboard session', async () => {
    const owner = await tenantOnTier(t, 'pro');
    const statuses: number[] = [];
    let last;
    for (let i = 0; i < 6; i++) {
      last = await as(t, owner).post(agentsUrl(owner), { name: `a${i}` });
      statuses.push(last.status);
    }
    expect(statuses.filter((s) => s === 201).length).toBeLessThanOrEqual(4);
    expect429(last!);
  });

  it('answers 429 past the read limit on list and activity', async () => {
    const owner = await tenantOnTier(t, 'pro');
    const a = await registerAgent(t, owner);
    let last;
    for (let i = 0; i < 7; i++) last = await as(t, owner).get(i % 2 ? agentsUrl(owner) : agentsUrl(owner, `/${a.id}/activity`));
    expect429(last!);
  });

  it('limits the end-user agents API per user', async () => {
    const owner = await tenantOnTier(t, 'pro');
    const u = await endUser(t, owner);
    let last;
    for (let i = 0; i < 7; i++) last = await t.http().get('/v1/users/me/agents').set('Authorization', `Bearer ${u.accessToken}`);
    expect429(last!);
    const other = await endUser(t, owner);
    await t.http().get('/v1/users/me/agents').set('Authorization', `Bearer ${other.accessToken}`).expect(200);
  });
});
