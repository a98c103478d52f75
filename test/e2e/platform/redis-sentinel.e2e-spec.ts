import { ChildProcess, spawn } from 'child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'fs';
import { tmpdir } from 'os';
import { join } from 'path';
import Redis from 'ioredis';
import { createTenant, TenantFixture } from '../../factories/tenant.factory';
import { createTestApp, randomIp, TestApp } from '../../setup/app';
import { freePortBelowEphemeral } from '../../setup/ports';
import { redisAnswers } from '../../setup/own-redis';
import { eventually } from '../webhooks/webhook-helpers';

const MASTER = 'authp-test';

/**
 * REDIS_SENTINELS: the service finds the Redis primary through real sentinels (REDIS_URL's host is
 * not used), and after a failover (SENTINEL FAILOVER: the replica is promoted, the old primary
 * demoted) it follows the new primary: writes go on there, nothing is refused for long.
 */
describe('Redis Sentinel: the primary found through the sentinels, and found again after a failover', () => {
  const procs: ChildProcess[] = [];
  let dir: string;
  let ports: { primary: number; replica: number; sentinel: number };
  let t: TestApp;
  let tenant: TenantFixture;
  let sentinel: Redis;

  const redisServer = (args: string[]) => {
    const p = spawn('redis-server', args, { stdio: 'ignore' });
    procs.push(p);
    return p;
  };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'authp-sentinel-'));
    ports = { primary: await freePortBelowEphemeral(), replica: await freePortBelowEphemeral(), sentinel: await freePortBelowEphemeral() };
    // the full sync writes an RDB file: into the test's own directory, not the working directory
    const base = ['--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir];
    redisServer(['--port', String(ports.primary), ...base]);
    redisServer(['--port', String(ports.replica), ...base, '--replicaof', '127.0.0.1', String(ports.primary)]);
    const conf = join(dir, 'sentinel.conf');
    writeFileSync(
      conf,
      [`port ${ports.sentinel}`, 'bind 127.0.0.1', `dir ${dir}`, `sentinel monitor ${MASTER} 127.0.0.1 ${ports.primary} 1`, `sentinel down-after-milliseconds ${MASTER} 1000`, `sentinel failover-timeout ${MASTER} 5000`, ''].join('\n'),
    );
    redisServer([conf, '--sentinel']);
    await eventually(async () => (await redisAnswers(ports.primary)) && (await redisAnswers(ports.replica)) && (await redisAnswers(ports.sentinel)), 10_000, 'the Redis servers to start');
    sentinel = new Redis(ports.sentinel, '127.0.0.1');
    // the sentinel has found the replica (through the primary's INFO) and the replica is in sync
    await eventually(async () => ((await sentinel.call('SENTINEL', 'REPLICAS', MASTER)) as unknown[]).length === 1, 20_000, 'the sentinel to find the replica');
    const replica = new Redis(ports.replica, '127.0.0.1');
    await eventually(async () => /master_link_status:up/.test(await replica.info('replication')), 10_000, 'the replica to sync');
    replica.disconnect();
    // REDIS_URL points nowhere: only the sentinels can lead to the primary
    t = await createTestApp({ REDIS_URL: 'redis://127.0.0.1:1/0', REDIS_SENTINELS: `127.0.0.1:${ports.sentinel}`, REDIS_SENTINEL_MASTER: MASTER });
    tenant = await createTenant(t.db, { anonymous_signins_enabled: true });
  }, 60_000);

  afterAll(async () => {
    await t?.close();
    sentinel?.disconnect();
    for (const p of procs) p.kill('SIGKILL');
    if (dir) rmSync(dir, { recursive: true, force: true });
    // ioredis' socket-close timers of the Sentinel connections the failover replaced (2 s each)
    await new Promise((r) => setTimeout(r, 2_100));
  }, 60_000);

  const guest = () => t.http().post('/v1/auth/anonymous').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', randomIp()).send({});
  /** Each of the run's keys on that server, with its serialized value (DUMP). */
  const valuesOn = async (port: number) => {
    const c = new Redis(port, '127.0.0.1');
    try {
      const keys = await c.keys(`${process.env.REDIS_KEY_PREFIX}*`);
      const dumps = await Promise.all(keys.map((k) => c.dumpBuffer(k)));
      return new Map(keys.map((k, i) => [k, dumps[i]?.toString('base64')]));
    } finally {
      c.disconnect();
    }
  };
  const keysOn = async (port: number) => (await valuesOn(port)).size;

  it('serves through the primary the sentinels name; after a failover it writes to the new primary', async () => {
    await guest().expect(201);
    await t.http().get('/ready').expect(200);
    expect(await keysOn(ports.primary)).toBeGreaterThan(0);

    await sentinel.call('SENTINEL', 'FAILOVER', MASTER);
    await eventually(async () => ((await sentinel.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', MASTER)) as string[])[1] === String(ports.replica), 20_000, 'the failover');
    // the new primary takes writes: within a few seconds every request is served again
    await eventually(async () => (await guest()).status === 201, 20_000, 'guest sign-in after the failover');
    for (let i = 0; i < 5; i++) await guest().expect(201);
    await t.http().get('/ready').expect(200);
    const promoted = new Redis(ports.replica, '127.0.0.1');
    try {
      expect(await promoted.info('replication')).toMatch(/role:master/);
      // sign-ins after the failover write on the promoted server: a key of the run is new or
      // changed there (counters are per time window, so it may be either; one may expire
      // meanwhile). Within a moment, not for the first sign-in: in about one run in ten its keys
      // changed on the old primary instead (the sentinel has promoted the replica, but the
      // +switch-master announcement has not reached the client yet, and the old primary, not yet
      // demoted, still takes writes); the next sign-in wrote on the promoted server
      await eventually(
        async () => {
          const before = await valuesOn(ports.replica);
          await guest().expect(201);
          const after = await valuesOn(ports.replica);
          return [...after].some(([k, v]) => before.get(k) !== v);
        },
        20_000,
        'a sign-in to write on the promoted server',
      );
    } finally {
      promoted.disconnect();
    }
    // three waits of up to 20 s each above (the failover, the first sign-in after it, a write on the promoted server)
  }, 90_000);

  it('a closed app leaves no connection to the sentinels (ioredis QUIT alone left its failover subscriptions open)', async () => {
    const others = async () => ((await sentinel.call('CLIENT', 'LIST')) as string).split('\n').filter((l) => l.trim() && !/ cmd=client\|list /.test(l));
    expect((await others()).length).toBeGreaterThan(0);
    const app = t;
    t = undefined as unknown as TestApp;
    await app.close();
    await eventually(async () => (await others()).length === 0, 5_000, 'the app\'s sentinel connections to close').catch(async (err: Error) => {
      throw new Error(`${err.message}: ${(await others()).join('; ')}`);
    });
  });

  it('a configuration naming sentinels without a master name, or a malformed sentinel list, does not start', async () => {
    await expect(createTestApp({ REDIS_SENTINELS: `127.0.0.1:${ports.sentinel}`, REDIS_SENTINEL_MASTER: '' })).rejects.toThrow(/REDIS_SENTINEL_MASTER: must name the master/);
    await expect(createTestApp({ REDIS_SENTINELS: 'localhost', REDIS_SENTINEL_MASTER: MASTER })).rejects.toThrow(/REDIS_SENTINELS: "localhost" is not host:port/);
  });
});
