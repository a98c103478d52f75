import { AddressInfo, createServer, Server, Socket } from 'net';
import { Client } from 'pg';
import { createApiKey, signupTenant } from '../../factories/dashboard.factory';
import { createTestApp, randomIp, STRONG_PASSWORD, uniqueEmail } from '../../setup/app';

/**
 * A TCP proxy in front of PostgreSQL that can freeze: it stops passing bytes both ways without
 * closing anything (a network that drops packets, a server that hangs), which no server-side
 * timeout can end.
 */
async function freezableProxy(target: URL): Promise<{ server: Server; port: number; freeze: () => void; thaw: () => void }> {
  let frozen = false;
  const sockets: Socket[] = [];
  const server = createServer((client) => {
    const upstream = new Socket();
    sockets.push(client, upstream);
    upstream.connect(Number(target.port || 5432), target.hostname);
    client.on('data', (d) => !frozen && upstream.write(d));
    upstream.on('data', (d) => !frozen && client.write(d));
    for (const [a, b] of [[client, upstream], [upstream, client]]) {
      a.on('error', () => b.destroy());
      a.on('close', () => b.destroy());
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const close = server.close.bind(server);
  server.close = ((cb?: (err?: Error) => void) => {
    for (const s of sockets) s.destroy();
    return close(cb);
  }) as Server['close'];
  return { server, port: (server.address() as AddressInfo).port, freeze: () => (frozen = true), thaw: () => (frozen = false) };
}

/**
 * DATABASE_STATEMENT_TIMEOUT_MS: a statement that waits too long (for a lock a stuck transaction
 * holds) is cancelled by PostgreSQL, and a connection that stops answering altogether is given
 * up on our side: 503 server/unavailable in both cases, never a request (or /ready) held for ever.
 */
describe('PostgreSQL timeouts', () => {
  const dbUrl = new URL(process.env.DATABASE_URL as string);

  it('a sign-in waiting for a row lock a stuck transaction holds answers 503 after the statement timeout; once the lock goes, it works', async () => {
    const t = await createTestApp({ DATABASE_STATEMENT_TIMEOUT_MS: '1000' });
    const blocker = new Client({ connectionString: dbUrl.toString() });
    await blocker.connect();
    try {
      const dash = await signupTenant(t);
      const { key } = await createApiKey(t, dash);
      const email = uniqueEmail('locked');
      const reg = await t.http().post('/v1/auth/register').set('X-API-Key', key).set('X-Forwarded-For', randomIp()).send({ email, password: STRONG_PASSWORD, consent: true }).expect(201);
      const login = () => t.http().post('/v1/auth/login').set('X-API-Key', key).set('X-Forwarded-For', randomIp()).send({ email, password: STRONG_PASSWORD }).timeout(10_000);
      await blocker.query('BEGIN');
      await blocker.query('SELECT 1 FROM users WHERE id = $1 FOR UPDATE', [reg.body.user.id]);
      const res = await login();
      expect([res.status, res.body.code]).toEqual([503, 'server/unavailable']);
      await blocker.query('ROLLBACK');
      await login().expect(200);
    } finally {
      await blocker.end();
      await t.close();
    }
  });

  it('a connection that stops answering: /ready fails within seconds, a request answers 503 after the statement timeout plus 5 s, and the pool recovers', async () => {
    const proxy = await freezableProxy(dbUrl);
    const proxied = new URL(dbUrl.toString());
    proxied.hostname = '127.0.0.1';
    proxied.port = String(proxy.port);
    const t = await createTestApp({ DATABASE_URL: proxied.toString(), DATABASE_STATEMENT_TIMEOUT_MS: '1000', DATABASE_CONNECT_TIMEOUT_MS: '1000' });
    try {
      const dash = await signupTenant(t);
      const { key } = await createApiKey(t, dash);
      const email = uniqueEmail('frozen');
      await t.http().post('/v1/auth/register').set('X-API-Key', key).set('X-Forwarded-For', randomIp()).send({ email, password: STRONG_PASSWORD, consent: true }).expect(201);
      await t.http().get('/ready').expect(200);
      proxy.freeze();
      let started = Date.now();
      const ready = await t.http().get('/ready').timeout(10_000);
      expect(ready.status).toBe(503);
      expect(Date.now() - started).toBeLessThan(4_000);
      started = Date.now();
      const res = await t.http().post('/v1/auth/login').set('X-API-Key', key).set('X-Forwarded-For', randomIp()).send({ email, password: STRONG_PASSWORD }).timeout(15_000);
      expect([res.status, res.body.code]).toEqual([503, 'server/unavailable']);
      expect(Date.now() - started).toBeLessThan(9_000);
      // the network heals: connections that lost bytes meanwhile were given up, new ones answer
      proxy.thaw();
      const deadline = Date.now() + 15_000;
      let status = 0;
      while (Date.now() < deadline && status !== 200) {
        status = (await t.http().post('/v1/auth/login').set('X-API-Key', key).set('X-Forwarded-For', randomIp()).send({ email, password: STRONG_PASSWORD }).timeout(15_000)).status;
      }
      expect(status).toBe(200);
      await t.http().get('/ready').expect(200);
    } finally {
      await t.close();
      proxy.server.close();
    }
  }, 45_000);
});
