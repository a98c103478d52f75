import { randomUUID } from 'crypto';
import { createTenant, TenantFixture } from '../../factories/tenant.factory';
import { createTestApp, randomIp, STRONG_PASSWORD, TestApp, uniqueEmail } from '../../setup/app';

/**
 * Load shedding: past ARGON2_MAX_WAITING password checks queued in a process, sign-in answers 503
 * with Retry-After at once instead of queueing without bound; the failed sign-in throttle counts
 * nothing for a refused check, and the service serves normally once the burst has passed.
 */
const ACCOUNT_LIMIT = 20;

describe('password checks: a full hashing queue answers 503 with Retry-After', () => {
  let t: TestApp;
  let tenant: TenantFixture;
  beforeAll(async () => {
    // a costlier hash, so a burst queues behind it
    // an account limit the burst cannot reach (12 attempts), but that a probe afterwards can count down
    t = await createTestApp({ ARGON2_MAX_CONCURRENCY: '1', ARGON2_MAX_WAITING: '2', ARGON2_MEMORY_KIB: '8192', ARGON2_TIME_COST: '3', LOGIN_FAILURES_PER_ACCOUNT: String(ACCOUNT_LIMIT) });
    tenant = await createTenant(t.db);
  });
  afterAll(() => t.close());

  const login = (email: string, password: string) => t.http().post('/v1/auth/login').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', randomIp()).send({ email, password });

  it('a burst past the queue: some 503 server/unavailable with Retry-After, none 500; afterwards sign-in works and nothing was counted against the account', async () => {
    const email = uniqueEmail('queue');
    await t.http().post('/v1/auth/register').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', randomIp()).send({ email, password: STRONG_PASSWORD, consent: true }).expect(201);
    const burst = await Promise.all(Array.from({ length: 12 }, (_, i) => login(email, i % 2 ? STRONG_PASSWORD : 'a wrong password')));
    const statuses = burst.map((r) => r.status);
    expect(statuses.every((s) => [200, 401, 503].includes(s))).toBe(true);
    const shed = burst.filter((r) => r.status === 503);
    expect(shed.length).toBeGreaterThan(0);
    for (const r of shed) {
      expect(r.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(r.body).toMatchObject({ code: 'server/unavailable', detail: 'Too many password checks are waiting; retry shortly' });
      expect(r.headers['retry-after']).toBe('1');
    }
    await login(email, STRONG_PASSWORD).expect(200);
    // the account's failure count holds the wrong passwords that were checked (401), none of the
    // shed ones: from fresh addresses, exactly the rest of the account limit is left
    const checkedWrong = burst.filter((r, i) => i % 2 === 0 && r.status === 401).length;
    expect(burst.filter((r, i) => i % 2 === 0 && r.status === 503).length).toBeGreaterThan(0);
    let left = 0;
    for (;;) {
      const r = await login(email, 'a wrong password');
      if (r.status !== 401) {
        expect(r.status).toBe(429);
        break;
      }
      left++;
      if (left > ACCOUNT_LIMIT) break;
    }
    expect(left).toBe(ACCOUNT_LIMIT - checkedWrong);
  });

  it('signup replays check the password too: past the queue the honeypot decoy answers 503 as a real signup does, never 409', async () => {
    const replays = async (website?: string) => {
      const body = { email: uniqueEmail('queue-signup'), password: STRONG_PASSWORD, tenant_name: `Queue ${randomUUID().slice(0, 8)}`, consent_terms: true, consent_privacy: true, idempotency_key: randomUUID(), ...(website ? { website } : {}) };
      const signup = () => t.http().post('/v1/onboarding/signup').set('X-Forwarded-For', randomIp()).send(body);
      await signup().expect(201);
      // staggered, so some replays get their hash through and then find the queue full at the
      // password check (all at once, they are shed at the hash every signup makes first)
      const sent = [];
      for (let i = 0; i < 30; i++) {
        sent.push(signup().then((r) => r)); // then() sends it now
        await new Promise((resolve) => setTimeout(resolve, 4));
      }
      return (await Promise.all(sent)).map((r) => {
        if (r.status === 503) expect(r.headers['retry-after']).toBe('1');
        return r.status;
      });
    };
    for (const statuses of [await replays(), await replays('http://spam.example')]) {
      expect(statuses.filter((s) => s !== 201 && s !== 503)).toEqual([]);
      expect(statuses).toContain(503);
    }
  });
});
