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
  });

  const guest = () => t.http().post('/v1/auth/anonymous').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', randomIp()).send({});
  const keyNamesOn = async (port: number) => {
    const c = new Redis(port, '127.0.0.1');
    try {
      return new Set(await c.keys(`${process.env.REDIS_KEY_PREFIX}*`));
    } finally {
      c.disconnect();
    }
  };
  const keysOn = async (port: number) => (await keyNamesOn(port)).size;

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
      // a counter written after the failover (a new address's) is on the promoted server; compared
      // by name, as a short-lived key may expire meanwhile
      const before = await keyNamesOn(ports.replica);
      await guest().expect(201);
      expect([...(await keyNamesOn(ports.replica))].filter((k) => !before.has(k)).length).toBeGreaterThan(0);
    } finally {
      promoted.disconnect();
    }
  });

  it('a configuration naming sentinels without a master name, or a malformed sentinel list, does not start', async () => {
    await expect(createTestApp({ REDIS_SENTINELS: `127.0.0.1:${ports.sentinel}`, REDIS_SENTINEL_MASTER: '' })).rejects.toThrow(/REDIS_SENTINEL_MASTER: must name the master/);
    await expect(createTestApp({ REDIS_SENTINELS: 'localhost', REDIS_SENTINEL_MASTER: MASTER })).rejects.toThrow(/REDIS_SENTINELS: "localhost" is not host:port/);
  });
});
