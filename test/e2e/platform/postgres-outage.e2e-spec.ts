import { AddressInfo, connect, createServer, Socket } from 'net';
import { createApiKey, signupTenant } from '../../factories/dashboard.factory';
import { createTestApp, randomIp, STRONG_PASSWORD, TestApp, uniqueEmail } from '../../setup/app';

/**
 * PostgreSQL out of reach while the API runs (a restart, a failover, a network cut): the API
 * reaches it through a TCP relay this test can cut (the server itself is shared by other tests).
 * Sign-in answers 503, and attempts with the right password made meanwhile are not counted as
 * failed sign-ins: the users are not locked out once it is back.
 */
describe('PostgreSQL unreachable', () => {
  const target = new URL(process.env.DATABASE_URL!);
  let up = true;
  const open = new Set<Socket>();
  const relay = createServer((client) => {
    if (!up) return client.destroy();
    const server = connect(Number(target.port || 5432), target.hostname);
    const end = () => {
      client.destroy();
      server.destroy();
      open.delete(client);
      open.delete(server);
    };
    for (const sock of [client, server]) {
      open.add(sock);
      sock.on('error', end).on('close', end);
    }
    client.pipe(server).pipe(client);
  });
  let t: TestApp;
  beforeAll(async () => {
    await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', () => resolve()));
    const via = new URL(target);
    via.hostname = '127.0.0.1';
    via.port = String((relay.address() as AddressInfo).port);
    t = await createTestApp({ DATABASE_URL: via.toString() });
  });
  afterAll(async () => {
    up = true;
    await t.close();
    open.forEach((sock) => sock.destroy());
    await new Promise((r) => relay.close(r));
  });

  it('sign-in answers 503 server/unavailable, and attempts with the right password are not counted as failures once it is back', async () => {
    const dash = await signupTenant(t);
    const { key } = await createApiKey(t, dash);
    const email = uniqueEmail('outage');
    await t.http().post('/v1/auth/register').set('X-API-Key', key).set('X-Forwarded-For', randomIp()).send({ email, password: STRONG_PASSWORD, consent: true }).expect(201);
    const ip = randomIp();
    const login = () => t.http().post('/v1/auth/login').set('X-API-Key', key).set('X-Forwarded-For', ip).send({ email, password: STRONG_PASSWORD });
    const dashLogin = () => t.http().post('/v1/auth/dashboard/login').set('X-Forwarded-For', ip).send({ email: dash.email, password: STRONG_PASSWORD });
    const reauth = () => t.http().post('/v1/auth/dashboard/reauth').set('X-Forwarded-For', ip).set('Cookie', dash.cookie).set('X-CSRF-Token', dash.csrf).send({ password: STRONG_PASSWORD });
    await login().expect(200); // the API key is cached: the requests below reach the password check
    await reauth().expect(200);
    up = false;
    open.forEach((sock) => sock.destroy());
    for (let i = 0; i < 7; i++) {
      const [user, owner] = await Promise.all([login(), dashLogin()]);
      expect([user.status, user.body.code, owner.status, owner.body.code]).toEqual([503, 'server/unavailable', 503, 'server/unavailable']);
      expect((await reauth()).status).toBe(503);
    }
    up = true;
    await login().expect(200);
    await reauth().expect(200);
    await dashLogin().expect(200);
  });
});
