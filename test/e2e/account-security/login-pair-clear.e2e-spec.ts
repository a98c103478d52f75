import { createTestApp, randomIp, STRONG_PASSWORD, TestApp, uniqueEmail } from '../../setup/app';
import { createTenant, TenantFixture } from '../../factories/tenant.factory';

/**
 * Found by a mutation review: LoginThrottleService ("a right credential: its count is taken back, the
 * pair's failures cleared"; SETTLE_SCRIPT `clear`). No test signed in successfully between
 * failures of one (account, address) pair, so keeping the pair's earlier failures after a success
 * passed every test: the owner's typos would add up across successful sign-ins until the pair
 * locks (LOGIN_FAILURES_PER_ACCOUNT_IP, 5).
 */
describe('a successful sign-in clears its pair\'s failures', () => {
  let t: TestApp;
  let tenant: TenantFixture;
  beforeAll(async () => {
    t = await createTestApp();
    tenant = await createTenant(t.db);
  });
  afterAll(() => t.close());

  const login = (email: string, password: string, ip: string) =>
    t.http().post('/v1/auth/login').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', ip).send({ email, password });

  it('4 typos, a success, then a typo from the same address: the right password still signs in', async () => {
    const email = uniqueEmail('pair');
    await t.http().post('/v1/auth/register').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', randomIp()).send({ email, password: STRONG_PASSWORD, consent: true }).expect(201);
    const ip = randomIp();
    for (let i = 0; i < 4; i++) await login(email, 'wrong password!!', ip).expect(401);
    await login(email, STRONG_PASSWORD, ip).expect(200);
    await login(email, 'wrong password!!', ip).expect(401);
    await login(email, STRONG_PASSWORD, ip).expect(200);
  });
});
