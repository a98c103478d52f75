import { spawn } from 'child_process';
import { createApiKey, signupTenant } from '../../factories/dashboard.factory';
import { createTestApp, randomIp, STRONG_PASSWORD, TestApp, uniqueEmail } from '../../setup/app';
import { ownRedis } from '../../setup/own-redis';
import { eventually, sleep } from '../webhooks/webhook-helpers';

/**
 * A Redis that stops answering without closing its connections (a stalled server, a network that
 * drops packets): requests that need it fail closed with 503 after REDIS_COMMAND_TIMEOUT_MS
 * instead of hanging, and /ready says so. A Redis of the test's own, stopped with SIGSTOP.
 */
describe('Redis stalled', () => {
  let t: TestApp;
  let server: ReturnType<typeof spawn>;
  beforeAll(async () => {
    const own = await ownRedis();
    server = own.startRedis();
    await eventually(own.ping, 10_000, 'redis-server to start');
    t = await createTestApp({ REDIS_URL: `redis://127.0.0.1:${own.port}`, REDIS_COMMAND_TIMEOUT_MS: '500' });
  });
  afterAll(async () => {
    server.kill('SIGCONT');
    await t.close();
    server.kill('SIGKILL');
  });

  it('sign-in, a bearer call and /ready answer 503 within the timeout, and all recover once Redis answers again', async () => {
    const dash = await signupTenant(t);
    const { key } = await createApiKey(t, dash);
    const email = uniqueEmail('stall');
    const reg = await t.http().post('/v1/auth/register').set('X-API-Key', key).set('X-Forwarded-For', randomIp()).send({ email, password: STRONG_PASSWORD, consent: true }).expect(201);
    const login = () => t.http().post('/v1/auth/login').set('X-API-Key', key).set('X-Forwarded-For', randomIp()).send({ email, password: STRONG_PASSWORD }).timeout(5000);
    const me = () => t.http().get('/v1/auth/me').set('Authorization', `Bearer ${reg.body.access_token}`).timeout(5000);
    await login().expect(200);
    server.kill('SIGSTOP');
    try {
      const [signIn, bearer, ready] = await Promise.all([login(), me(), t.http().get('/ready').timeout(5000)]);
      expect([signIn.status, signIn.body.code]).toEqual([503, 'server/unavailable']);
      expect([bearer.status, bearer.body.code]).toEqual([503, 'server/unavailable']);
      expect(ready.status).toBe(503);
      await t.http().get('/health').timeout(5000).expect(200);
    } finally {
      server.kill('SIGCONT');
    }
    await eventually(async () => (await login()).status === 200, 10_000, 'sign-in once Redis answers');
    await me().expect(200);
  }, 30_000);

  it('sign-in attempts refused with 503 while Redis stalled are not counted when it resumes and runs them late', async () => {
    const dash = await signupTenant(t);
    const { key } = await createApiKey(t, dash);
    const email = uniqueEmail('stall-late');
    await t.http().post('/v1/auth/register').set('X-API-Key', key).set('X-Forwarded-For', randomIp()).send({ email, password: STRONG_PASSWORD, consent: true }).expect(201);
    const ip = randomIp();
    const login = () => t.http().post('/v1/auth/login').set('X-API-Key', key).set('X-Forwarded-For', ip).send({ email, password: STRONG_PASSWORD }).timeout(5000);
    await login().expect(200); // the API key is cached
    server.kill('SIGSTOP');
    try {
      // more than the 5 failures of a pair the throttle allows
      for (let i = 0; i < 7; i++) expect((await login()).status).toBe(503);
    } finally {
      server.kill('SIGCONT');
    }
    await sleep(300); // Redis runs what it was sent meanwhile
    await login().expect(200);
  }, 30_000);
});
