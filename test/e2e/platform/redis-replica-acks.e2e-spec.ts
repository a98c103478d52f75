import { spawn } from 'child_process';
import { createServer } from 'net';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import Redis from 'ioredis';
import { createApiKey, signupTenant } from '../../factories/dashboard.factory';
import { createTestApp, randomIp, STRONG_PASSWORD, TestApp, uniqueEmail } from '../../setup/app';
import { redisAnswers } from '../../setup/own-redis';
import { freePortBelowEphemeral } from '../../setup/ports';
import { eventually, sleep } from '../webhooks/webhook-helpers';
import { writeElseDelete } from '../../../src/shared/redis/exec-all';
import { createRedis, quitRedis } from '../../../src/shared/redis/redis.module';

/**
 * REDIS_REVOCATION_REPLICAS: a revocation or cache invalidation is answered only once that many
 * replicas hold it (Redis WAIT). Replication is asynchronous: without it, a failover to a replica
 * that missed the write serves the cached "live" state it overwrote again (a logged-out session's
 * access token accepted until that expires). A real primary and replica; a failover is the
 * replica's data served on the port the API connects to (a managed endpoint that follows it).
 */
describe('Redis replicas acknowledging revocations (REDIS_REVOCATION_REPLICAS)', () => {
  let t: TestApp;
  let portA: number;
  let portB: number;
  const servers: ReturnType<typeof spawn>[] = [];
  let primary: ReturnType<typeof spawn>;
  const start = (port: number, replicaOf?: number) => {
    const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'];
    if (replicaOf) args.push('--replicaof', '127.0.0.1', String(replicaOf));
    // a replica's full sync writes dump.rdb: into a directory of the server's own, not the checkout
    args.push('--dir', fs.mkdtempSync(path.join(os.tmpdir(), 'authp-replica-')));
    const p = spawn('redis-server', args, { stdio: 'ignore' });
    servers.push(p);
    return p;
  };
  const admin = async <T>(port: number, fn: (r: Redis) => Promise<T>): Promise<T> => {
    const r = new Redis(port, '127.0.0.1', { lazyConnect: true });
    try {
      await r.connect();
      return await fn(r);
    } finally {
      r.disconnect();
    }
  };
  const linkUp = (port: number) => admin(port, async (r) => /master_link_status:up/.test(await r.info('replication')));

  beforeAll(async () => {
    portA = await freePortBelowEphemeral();
    portB = await freePortBelowEphemeral();
    primary = start(portA);
    await eventually(() => redisAnswers(portA), 10_000, 'primary');
    start(portB, portA);
    await eventually(() => redisAnswers(portB), 10_000, 'replica');
    await eventually(() => linkUp(portB), 10_000, 'replica synced');
    t = await createTestApp({ REDIS_URL: `redis://127.0.0.1:${portA}`, REDIS_REVOCATION_REPLICAS: '1', REDIS_REVOCATION_WAIT_MS: '300' });
  }, 60_000);
  afterAll(async () => {
    await t?.close();
    for (const s of servers) s.kill('SIGKILL');
    // ioredis' close timers of the probes
    await sleep(2100);
  });

  /** The replica stops taking the primary's writes (it has everything written so far). */
  const replicaDetached = async () => {
    await admin(portA, async (a) => expect(await a.wait(1, 5000)).toBe(1));
    await admin(portB, (b) => b.call('REPLICAOF', 'NO', 'ONE'));
  };

  /** Failover: the replica's data is served on port A (the API's endpoint), then A and B are a primary and its replica again. */
  const failover = async () => {
    primary.kill('SIGKILL');
    await admin(portB, (b) => b.call('REPLICAOF', 'NO', 'ONE')); // promoted (a no-op when detached already)
    await eventually(async () => !(await redisAnswers(portA)), 10_000, 'old primary down');
    primary = start(portA, portB);
    await eventually(async () => (await redisAnswers(portA)) && linkUp(portA), 15_000, 'port A synced from the promoted replica');
    await admin(portA, (a) => a.call('REPLICAOF', 'NO', 'ONE'));
    await admin(portB, (b) => b.call('REPLICAOF', '127.0.0.1', String(portA)));
    await eventually(() => linkUp(portB), 10_000, 'replica synced again');
  };

  /** A request answered once the API reconnected to Redis (not 503). */
  const settled = async (req: () => Promise<{ status: number }>) => {
    let last = { status: 0 };
    await eventually(async () => (last = await req()).status !== 503, 15_000, 'the API reconnected to Redis');
    return last.status;
  };

  const endUser = async () => {
    const dash = await signupTenant(t);
    const { key } = await createApiKey(t, dash);
    const reg = await t.http().post('/v1/auth/register').set('X-API-Key', key).set('X-Forwarded-For', randomIp()).send({ email: uniqueEmail('replica'), password: STRONG_PASSWORD, consent: true }).expect(201);
    const token = reg.body.access_token as string;
    return {
      dash,
      key,
      me: () => t.http().get('/v1/auth/me').set('Authorization', `Bearer ${token}`),
      logout: () => t.http().post('/v1/auth/logout').set('Authorization', `Bearer ${token}`),
    };
  };

  it('a logout the replica holds is answered 204 and survives a failover to it', async () => {
    const u = await endUser();
    await u.me().expect(200); // the session cached as live
    await u.logout().expect(204);
    await failover();
    expect(await settled(() => u.me())).toBe(401);
  }, 90_000);

  it('a logout no replica acknowledges answers 503, not 204; after a failover to the replica that missed it, the retried logout ends the token', async () => {
    const u = await endUser();
    await u.me().expect(200);
    await replicaDetached();
    const first = await u.logout().expect(503);
    expect(first.body.code).toBe('server/unavailable');
    await failover();
    // the replica still has the session cached as live: the logout was not answered as done
    expect(await settled(() => u.me())).toBe(200);
    await u.logout().expect(204);
    await u.me().expect(401);
  }, 90_000);

  it("a password change whose session marks no replica acknowledges rolls back (503) and leaves the other sessions working; repeated once one does, it ends them", async () => {
    const dash = await signupTenant(t);
    const { key } = await createApiKey(t, dash);
    const email = uniqueEmail('change');
    const reg = await t.http().post('/v1/auth/register').set('X-API-Key', key).set('X-Forwarded-For', randomIp()).send({ email, password: STRONG_PASSWORD, consent: true }).expect(201);
    const other = (await t.http().post('/v1/auth/login').set('X-API-Key', key).set('X-Forwarded-For', randomIp()).send({ email, password: STRONG_PASSWORD }).expect(200)).body.access_token as string;
    const otherMe = () => t.http().get('/v1/auth/me').set('Authorization', `Bearer ${other}`);
    await otherMe().expect(200);
    const change = () => t.http().post('/v1/auth/password/change').set('Authorization', `Bearer ${reg.body.access_token}`).send({ current_password: STRONG_PASSWORD, new_password: 'a brand new passphrase 4' });
    await replicaDetached();
    expect((await change()).status).toBe(503);
    // rolled back: the marks the primary took are taken away again, the session is live
    await otherMe().expect(200);
    await failover();
    expect(await settled(() => otherMe())).toBe(200);
    await change().expect(204);
    await otherMe().expect(401);
  }, 90_000);

  it('an API key revocation no replica acknowledges answers 503; repeated once one does, the key is refused', async () => {
    const dash = await signupTenant(t);
    const k = await createApiKey(t, dash);
    const login = () => t.http().post('/v1/auth/login').set('X-API-Key', k.key).set('X-Forwarded-For', randomIp()).send({ email: uniqueEmail('nobody'), password: STRONG_PASSWORD });
    expect((await login()).body.code).toBe('auth/invalid_credentials'); // the key cached
    await replicaDetached();
    const revoke = () => t.http().delete(`/v1/auth/dashboard/tenants/${dash.slug}/api-keys/${k.id}`).set('Cookie', dash.cookie).set('X-CSRF-Token', dash.csrf);
    expect((await revoke()).status).toBe(503);
    await failover();
    expect(await settled(async () => revoke())).toBe(200);
    expect((await login()).body.code).toBe('auth/invalid_api_key');
  }, 90_000);
});

/**
 * The writes that wait for replicas, and their WAIT, go on a connection of their own: Redis holds
 * every later command of the connection a WAIT is sent on, so on the process's shared one a
 * revocation waiting for a missing replica held up every request (/ready included) as long. The
 * test's Redis has no replica: the WAIT blocks for its whole REDIS_REVOCATION_WAIT_MS. No timing
 * is asserted: Redis itself (CLIENT LIST) says whether the WAIT still blocks when an answer comes.
 */
describe('REDIS_REVOCATION_REPLICAS with the replica down: only the revocation waits', () => {
  let t: TestApp;
  let admin: Redis;
  const waiting = async () => ((await admin.client('LIST')) as string).split('\n').some((l) => / cmd=wait\b/.test(l));
  beforeAll(async () => {
    admin = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
    expect(await admin.info('replication')).toMatch(/connected_slaves:0/);
    t = await createTestApp({ REDIS_REVOCATION_REPLICAS: '1', REDIS_REVOCATION_WAIT_MS: '8000', REDIS_COMMAND_TIMEOUT_MS: '20000' });
  }, 60_000);
  afterAll(async () => {
    await t?.close();
    admin?.disconnect();
  });

  it("a logout waiting for the missing replica holds up neither /ready, another user's request nor a sign-in; it answers 503", async () => {
    const dash = await signupTenant(t);
    const { key } = await createApiKey(t, dash);
    const email = uniqueEmail('bystander');
    const register = async (address: string) =>
      (await t.http().post('/v1/auth/register').set('X-API-Key', key).set('X-Forwarded-For', randomIp()).send({ email: address, password: STRONG_PASSWORD, consent: true }).expect(201)).body
        .access_token as string;
    const [leaving, bystander] = [await register(uniqueEmail('leaving')), await register(email)];
    await t.http().get('/v1/auth/me').set('Authorization', `Bearer ${bystander}`).expect(200);
    expect(await waiting()).toBe(false);

    const logout = t.http().post('/v1/auth/logout').set('Authorization', `Bearer ${leaving}`).then((r) => r.status);
    await eventually(waiting, 10_000, "the logout's WAIT");
    const answered = async (req: Promise<{ status: number }>) => {
      const r = await req;
      return { status: r.status, waitStillBlocking: await waiting() };
    };
    const observed = await Promise.all([
      answered(t.http().get('/ready')),
      answered(t.http().get('/v1/auth/me').set('Authorization', `Bearer ${bystander}`)),
      answered(t.http().post('/v1/auth/login').set('X-API-Key', key).set('X-Forwarded-For', randomIp()).send({ email, password: STRONG_PASSWORD })),
    ]);
    expect(observed).toEqual([
      { status: 200, waitStillBlocking: true },
      { status: 200, waitStillBlocking: true },
      { status: 200, waitStillBlocking: true },
    ]);
    // a revocation no replica acknowledges is not answered as done
    expect(await logout).toBe(503);
  }, 60_000);
});

/** A client of a Redis that is away (nothing listens on its port), with its replica writer's connections recorded. */
async function deadRedis(): Promise<{ client: Redis; writers: Redis[] }> {
  // a port nothing answers on
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  const port = (srv.address() as { port: number }).port;
  await new Promise<void>((r) => srv.close(() => r()));
  const client = createRedis({ REDIS_URL: `redis://127.0.0.1:${port}`, REDIS_KEY_PREFIX: 'replica-acks:', REDIS_REVOCATION_REPLICAS: 1, REDIS_REVOCATION_WAIT_MS: 500 });
  client.on('error', () => undefined);
  // the writer connection writeElseDelete opens (client.duplicate)
  const writers: Redis[] = [];
  const duplicate = client.duplicate.bind(client);
  jest.spyOn(client, 'duplicate').mockImplementation((o) => {
    const w = duplicate(o);
    writers.push(w);
    return w;
  });
  return { client, writers };
}

/** While the writer connection is not ready, the writes waiting for it share one wait. */
describe('REDIS_REVOCATION_REPLICAS while Redis is away', () => {
  it('20 revocations at once fail (503) without passing the listener limit (MaxListenersExceededWarning)', async () => {
    const { client, writers } = await deadRedis();
    try {
      const pending = Promise.allSettled(
        Array.from({ length: 20 }, (_, i) => writeElseDelete(client, (c) => c.pipeline().set(`k${i}`, '1'), [`k${i}`])),
      );
      await new Promise((r) => setTimeout(r, 100));
      const readyListeners = writers[0].listenerCount('ready');
      const results = await pending;
      expect(results.every((r) => r.status === 'rejected')).toBe(true);
      // Node warns (MaxListenersExceededWarning) past getMaxListeners() (10)
      expect(readyListeners).toBeLessThanOrEqual(writers[0].getMaxListeners());
    } finally {
      await quitRedis(client);
    }
  });
});
