import { createTestApp, TestApp, uniqueEmail } from '../../setup/app';
import { agentToken, as, bearerCall, endUser, registerAgent, tenantOnTier } from '../agents/agents.helpers';

/** Sum of every authp_rate_limited_total series (any limiter label). */
async function rateLimitedSum(t: TestApp): Promise<number> {
  const text = (await t.http().get('/metrics').expect(200)).text;
  return text
    .split('\n')
    .filter((l) => l.startsWith('authp_rate_limited_total{'))
    .reduce((s, l) => s + Number(l.split(' ').pop()), 0);
}

describe('authp_rate_limited_total counts every 429, also those decided outside the rate-limit guard (docs/scaling.md)', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp({ AGENT_LIMITS_LOCAL_TTL_SECONDS: '1', RATE_LIMIT_INVITES_PER_ADDRESS_PER_HOUR: '1' });
  });
  afterAll(() => t.close());

  it("an agent's api_calls_per_min 429 is counted", async () => {
    const owner = await tenantOnTier(t, 'pro');
    const u = await endUser(t, owner);
    const a = await registerAgent(t, owner, { agent_settings: { rate_limits: { api_calls_per_min: 1 } } });
    const { token } = await agentToken(t, u, a.id);
    await bearerCall(t, token).expect(200);
    const before = await rateLimitedSum(t);
    await bearerCall(t, token).expect(429);
    expect(await rateLimitedSum(t)).toBe(before + 1);
    expect((await t.http().get('/metrics').expect(200)).text).toMatch(/authp_rate_limited_total\{limiter="agent_api_calls"\} [1-9]/);
  });

  it("a dashboard invitation's per-address 429 is counted", async () => {
    const owner = await tenantOnTier(t, 'pro');
    const email = uniqueEmail('invitee');
    const url = `/v1/auth/dashboard/tenants/${owner.slug}/members`;
    await as(t, owner).post(url, { email, role: 'member' }).expect(201);
    const before = await rateLimitedSum(t);
    // another invitation to the same address: over RATE_LIMIT_INVITES_PER_ADDRESS_PER_HOUR (1)
    const second = await as(t, owner).post(url, { email, role: 'member' });
    expect(second.status).toBe(429);
    expect(await rateLimitedSum(t)).toBe(before + 1);
  });
});
