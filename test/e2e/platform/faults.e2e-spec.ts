import { Logger } from '@nestjs/common';
import { Client } from 'pg';
import { Db } from '../../../src/shared/db/db.service';
import { createTenant, TenantFixture } from '../../factories/tenant.factory';
import { signupTenant } from '../../factories/dashboard.factory';
import { createTestApp, randomIp, STRONG_PASSWORD, TestApp, uniqueEmail } from '../../setup/app';

/**
 * Infrastructure faults: the failed-login throttle fails closed when Redis is unreachable (a limit
 * is never skipped), and PostgreSQL ending the API's idle connections does not end the process.
 */
describe('faults: Redis unreachable at sign-in, PostgreSQL ending idle connections', () => {
  let t: TestApp;
  let down: TestApp;
  let tenant: TenantFixture;
  beforeAll(async () => {
    t = await createTestApp();
    // same database, Redis on a closed port
    down = await createTestApp({ REDIS_URL: 'redis://127.0.0.1:1' });
    tenant = await createTenant(t.db);
  });
  afterAll(async () => {
    await down.close();
    await t.close();
  });

  it('end-user and dashboard sign-in answer 503 server/unavailable while the throttle cannot be read (never a sign-in past it)', async () => {
    const email = uniqueEmail('throttled');
    await t.http().post('/v1/auth/register').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', randomIp()).send({ email, password: STRONG_PASSWORD, consent: true }).expect(201);
    for (const password of ['wrong password!!', STRONG_PASSWORD]) {
      const res = await down.http().post('/v1/auth/login').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', randomIp()).send({ email, password });
      expect([password === STRONG_PASSWORD ? 'right' : 'wrong', res.status, res.body.code]).toEqual([password === STRONG_PASSWORD ? 'right' : 'wrong', 503, 'server/unavailable']);
      expect(res.body.access_token).toBeUndefined();
    }
    const owner = await signupTenant(t);
    const dash = await down.http().post('/v1/auth/dashboard/login').set('X-Forwarded-For', randomIp()).send({ email: owner.email, password: owner.password });
    expect(dash.status).toBe(503);
    expect(dash.headers['set-cookie']).toBeUndefined();
    // the healthy instance signs in as usual
    await t.http().post('/v1/auth/login').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', randomIp()).send({ email, password: STRONG_PASSWORD }).expect(200);
  });

  it('/ready answers 503 server/unavailable naming the unreachable store (not its address) while /health stays 200', async () => {
    const res = await down.http().get('/ready').expect(503);
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(res.body).toMatchObject({ status: 503, code: 'server/unavailable', detail: 'Unavailable: redis' });
    expect(JSON.stringify(res.body)).not.toMatch(/127\.0\.0\.1|ECONNREFUSED/);
    await down.http().get('/health').expect(200);
    await t.http().get('/ready').expect(200);
  });

  it('a failing /ready probe is a warning written once a minute at most, never an error line per probe', async () => {
    const error = jest.spyOn(Logger.prototype, 'error');
    const warn = jest.spyOn(Logger.prototype, 'warn');
    try {
      for (let i = 0; i < 3; i++) await down.http().get('/ready').expect(503);
      expect(error).not.toHaveBeenCalled();
      const lines = warn.mock.calls.map(([m]) => String(m)).filter((m) => m.startsWith('readiness check failed'));
      // the earlier test's probe already wrote this minute's line on this instance
      expect(lines.length).toBeLessThanOrEqual(1);
    } finally {
      error.mockRestore();
      warn.mockRestore();
    }
  });

  it('PostgreSQL ending a connection with a transaction open (a restart, a failover) fails that transaction, never the process', async () => {
    const db = t.app.get(Db);
    const admin = new Client({ connectionString: process.env.DATABASE_URL });
    await admin.connect();
    try {
      const attempt = db.tx(async (tx) => {
        const [{ pid }] = await tx.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
        // idle in transaction when the server ends it: pg emits 'error' on the checked-out client
        await admin.query('SELECT pg_terminate_backend($1)', [pid]);
        await new Promise((r) => setTimeout(r, 300));
        await tx.query('SELECT 1');
      });
      await expect(attempt).rejects.toThrow();
    } finally {
      await admin.end();
    }
    // the process goes on, and the pool did not keep the dead connection
    await Promise.all(Array.from({ length: 5 }, () => t.http().get('/ready').expect(200)));
    await t.http().post('/v1/auth/register').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', randomIp()).send({ email: uniqueEmail('after-tx'), password: STRONG_PASSWORD, consent: true }).expect(201);
  });

  it('PostgreSQL ending idle pooled connections (pg_terminate_backend) is survived: the next requests are served', async () => {
    const db = t.app.get(Db);
    // connections of both pools: the main one (TypeORM's) and the one for unflushed guest writes
    const clients = await Promise.all([1, 2, 3].map(() => db.pool.connect()));
    const pids = await Promise.all(clients.map(async (c) => (await c.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0].pid));
    clients.forEach((c) => c.release());
    const ephemeral = await Promise.all([1, 2, 3].map(() => db.ephemeral.query<{ pid: number }>('SELECT pg_backend_pid() AS pid, pg_sleep(0.05)')));
    pids.push(...new Set(ephemeral.map(([r]) => r.pid)));
    const admin = new Client({ connectionString: process.env.DATABASE_URL });
    await admin.connect();
    try {
      const r = await admin.query(`SELECT count(*)::int AS n FROM (SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid) x`, [pids]);
      expect(r.rows[0].n).toBe(pids.length);
      expect(pids.length).toBeGreaterThan(3);
    } finally {
      await admin.end();
    }
    await new Promise((r) => setTimeout(r, 300)); // the 'error' events of the idle clients arrive
    await t.http().get('/ready').expect(200);
    // a guest sign-in goes through the unflushed pool
    await t.db.query(`UPDATE tenants SET anonymous_signins_enabled = true WHERE id = $1`, [tenant.id]);
    await t.tenantChanged(tenant.id);
    await t.http().post('/v1/auth/anonymous').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', randomIp()).send({}).expect(201);
    await t.http().post('/v1/auth/register').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', randomIp()).send({ email: uniqueEmail('after'), password: STRONG_PASSWORD, consent: true }).expect(201);
  });
});
