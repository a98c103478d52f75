import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Queue } from 'bullmq';
import Redis from 'ioredis';
import { APP_CONFIG, AppConfig } from '../../../src/config/config';
import { resetConfigForTests } from '../../../src/config/config.module';
import { GuestsWorkerModule } from '../../../src/modules/guests/guests.module';
import { GUEST_PURGE_SCHEDULER_ID, GuestPurgeScheduler, MAINTENANCE_QUEUE } from '../../../src/modules/guests/purge/guest-purge.scheduler';
import { GUEST_PURGE_RUN, GuestPurgeService, PurgeAlreadyRunningError } from '../../../src/modules/guests/purge/guest-purge.service';
import { CliIo, runCli } from '../../../src/cli';
import { ExpiredRowsSweeper } from '../../../src/shared/maintenance/expired-rows.sweeper';
import { RunLeaseLostError, RunLeaseResult, withRunLease } from '../../../src/shared/maintenance/run-lock';
import { KernelModule } from '../../../src/shared/kernel.module';
import { randomIp, STRONG_PASSWORD, TestApp, uniqueEmail } from '../../setup/app';
import { shutGate } from '../../setup/hold-writes';
import { createIsolatedTestApp } from '../../setup/isolated-db';
import { withEnv } from '../../setup/with-env';
import { createTenant, TenantFixture } from '../../factories/tenant.factory';
import { createAgent } from '../../factories/agent.factory';

/** Inserts `n` guests of a tenant last active `daysAgo` days ago, each with a session and refresh token. */
async function staleGuests(t: TestApp, tenant: TenantFixture, n: number, daysAgo: number): Promise<void> {
  await t.db.query(
    `WITH u AS (
       INSERT INTO users (tenant_id, is_anonymous, last_active_at, created_at)
       SELECT $1, true, now() - make_interval(days => $3), now() - make_interval(days => $3) FROM generate_series(1, $2) RETURNING id
     ), s AS (
       INSERT INTO user_sessions (tenant_id, user_id) SELECT $1, id FROM u RETURNING id, user_id
     )
     INSERT INTO refresh_tokens (session_id, tenant_id, user_id, secret_hash, expires_at) SELECT id, $1, user_id, 'x', now() + interval '1 day' FROM s`,
    [tenant.id, n, daysAgo],
  );
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Returns once a statement is blocked by server pid `by` (waits for a lock it holds), or once
 * `p` has settled without ever blocking (the other side does not wait on the purge at all).
 */
async function blockedByOrSettled(t: TestApp, by: number, p: Promise<unknown>): Promise<void> {
  let settled = false;
  p.then(
    () => (settled = true),
    () => (settled = true),
  );
  for (let i = 0; i < 600; i++) {
    if (settled) return;
    const [r] = await t.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND $1 = ANY(pg_blocking_pids(pid))`, [by]);
    if (r.n > 0) return;
    await sleep(25);
  }
  throw new Error(`nothing ever waited for pid ${by}, and it did not settle`);
}

// Every purge here runs on a database of this file's own: a run purges every tenant's stale
// guests and takes the purge's one lease row, and other files on the shared database (guests,
// claims, their own purge runs) must not meet either. One database for the whole file: the
// schedule's workers below then find the purge done recently, and queue no catch-up run.
let t: TestApp & { databaseUrl: string };
beforeAll(async () => {
  t = await createIsolatedTestApp();
}, 60_000);
afterAll(() => t?.close());

describe('guest purge (spec 3.1, 8)', () => {
  let purge: GuestPurgeService;
  beforeAll(() => {
    purge = t.app.get(GuestPurgeService);
  });

  it('hard-deletes stale guests with their sessions and refresh tokens; recent guests and a claimed user of the same age survive', async () => {
    const tenant = await createTenant(t.db, { anonymous_signins_enabled: true, anonymous_user_ttl_days: 30 });
    await staleGuests(t, tenant, 3, 31);
    await staleGuests(t, tenant, 2, 29);
    // a guest claimed long ago, inactive for as long: never purged
    const g = await t.http().post('/v1/auth/anonymous').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', randomIp()).send({}).expect(201);
    await t.http().post('/v1/auth/register').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', randomIp()).set('Authorization', `Bearer ${g.body.access_token}`).send({ email: uniqueEmail(), password: STRONG_PASSWORD, consent: true }).expect(201);
    await t.db.query(`UPDATE users SET last_active_at = now() - interval '400 days' WHERE id = $1`, [g.body.user.id]);

    const r = await purge.runOnce();
    expect(r.perTenant.find((x) => x.tenantId === tenant.id)?.deleted).toBe(3);
    const left = await t.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM users WHERE tenant_id = $1 AND is_anonymous`, [tenant.id]);
    expect(left[0].n).toBe(2);
    expect(await t.db.query(`SELECT 1 FROM users WHERE id = $1`, [g.body.user.id])).toHaveLength(1);
    const orphans = await t.db.query(`SELECT 1 FROM user_sessions s LEFT JOIN users u ON u.id = s.user_id WHERE s.tenant_id = $1 AND u.id IS NULL`, [tenant.id]);
    expect(orphans).toHaveLength(0);
    const tokens = await t.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM refresh_tokens WHERE tenant_id = $1 AND revoked_at IS NULL`, [tenant.id]);
    expect(tokens[0].n).toBe(2 + 1); // the two recent guests + the claimed user's session
    const audit = await t.db.query<{ metadata: { count: number } }>(`SELECT metadata FROM audit_events WHERE tenant_id = $1 AND type = 'guests.purged'`, [tenant.id]);
    expect(audit).toHaveLength(1);
    expect(audit[0].metadata.count).toBe(3);
  });

  it('a claim arriving while the purge deletes that guest neither deadlocks nor half-claims: the guest is gone, the claim answers 401', async () => {
    const tenant = await createTenant(t.db, { anonymous_signins_enabled: true, anonymous_user_ttl_days: 30 });
    await staleGuests(t, tenant, 2, 31);
    const g = await t.http().post('/v1/auth/anonymous').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', randomIp()).send({}).expect(201);
    const id = g.body.user.id as string;
    await t.db.query(`UPDATE users SET last_active_at = now() - interval '40 days' WHERE id = $1`, [id]);
    // hold the purge after it locked the guest and its session, before its delete reaches the session
    const gate = await shutGate(t.db);
    const fn = `slow_purge_${id.replace(/-/g, '')}`;
    await t.db.query(`CREATE FUNCTION ${fn}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN ${gate.wait}; RETURN OLD; END $$`);
    await t.db.query(`CREATE TRIGGER ${fn} BEFORE DELETE ON users FOR EACH ROW WHEN (OLD.id = '${id}') EXECUTE FUNCTION ${fn}()`);
    try {
      const run = purge.runOnce();
      run.catch(() => undefined); // awaited below; a failure before then must not go unhandled
      const purgePid = await gate.reached();
      // the claim arrives while the purge holds the guest: it waits for the purge's locks
      const claimed = Promise.resolve(
        t.http().post('/v1/auth/register').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', randomIp()).set('Authorization', `Bearer ${g.body.access_token}`).send({ email: uniqueEmail('late'), password: STRONG_PASSWORD, consent: true }),
      );
      await blockedByOrSettled(t, purgePid, claimed);
      await gate.open();
      const [claim, r] = await Promise.all([claimed, run]);
      expect(claim.status).toBe(401);
      expect(claim.body.code).toBe('auth/invalid_token');
      expect(claim.headers['www-authenticate']).toBe('Bearer error="invalid_token"');
      expect(r.perTenant.find((x) => x.tenantId === tenant.id)?.deleted).toBe(3);
      expect(await t.db.query(`SELECT 1 FROM users WHERE id = $1`, [id])).toHaveLength(0);
      expect(await t.db.query(`SELECT 1 FROM audit_events WHERE type = 'user.claimed' AND target_id = $1`, [id])).toHaveLength(0);
    } finally {
      await gate.open(); // before the drop, which waits for the purge's transaction
      await t.db.query(`DROP TRIGGER ${fn} ON users`);
      await t.db.query(`DROP FUNCTION ${fn}()`);
    }
  });

  it("a purged guest's unexpired access token: 401 auth/invalid_token with the Bearer challenge (RFC 6750 section 3) on /me and every other bearer route", async () => {
    const tenant = await createTenant(t.db, { anonymous_signins_enabled: true, anonymous_user_ttl_days: 30 });
    const g = await t.http().post('/v1/auth/anonymous').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', randomIp()).send({}).expect(201);
    const bearer = `Bearer ${g.body.access_token}`;
    await t.http().get('/v1/auth/me').set('Authorization', bearer).expect(200);
    await t.http().get('/v1/users/me/agents').set('Authorization', bearer).expect(200);
    await t.db.query(`UPDATE users SET last_active_at = now() - interval '40 days' WHERE id = $1`, [g.body.user.id]);
    expect((await purge.runOnce()).perTenant.find((x) => x.tenantId === tenant.id)?.deleted).toBe(1);
    const me = await t.http().get('/v1/auth/me').set('Authorization', bearer).expect(401);
    expect(me.body.code).toBe('auth/invalid_token');
    expect(me.headers['www-authenticate']).toBe('Bearer error="invalid_token"');
    // routes that read no profile trust the session state the revocation check keeps (it was live)
    const agentId = '00000000-0000-4000-8000-000000000000';
    for (const res of [
      await t.http().get('/v1/users/me/agents').set('Authorization', bearer),
      await t.http().post(`/v1/users/me/agents/${agentId}/restore`).set('Authorization', bearer),
      await t.http().post('/v1/auth/logout').set('Authorization', bearer),
    ]) {
      expect(res.status).toBe(401);
      expect(res.body.code).toBe('auth/invalid_token');
    }
  });

  it('a stale guest whose session is held right now (a claim or refresh in flight) is skipped this run, without waiting', async () => {
    const tenant = await createTenant(t.db, { anonymous_signins_enabled: true, anonymous_user_ttl_days: 30 });
    await staleGuests(t, tenant, 2, 31);
    const g = await t.http().post('/v1/auth/anonymous').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', randomIp()).send({}).expect(201);
    await t.db.query(`UPDATE users SET last_active_at = now() - interval '40 days' WHERE id = $1`, [g.body.user.id]);
    const r = await t.db.tx(async (tx) => {
      await tx.query(`SELECT 1 FROM user_sessions WHERE user_id = $1 FOR UPDATE`, [g.body.user.id]);
      return purge.runOnce();
    });
    expect(r.perTenant.find((x) => x.tenantId === tenant.id)?.deleted).toBe(2);
    expect(await t.db.query(`SELECT 1 FROM users WHERE id = $1`, [g.body.user.id])).toHaveLength(1);
    // the next run takes it
    expect((await purge.runOnce()).perTenant.find((x) => x.tenantId === tenant.id)?.deleted).toBe(1);
  });

  it("uses each tenant's retention", async () => {
    const short = await createTenant(t.db, { anonymous_signins_enabled: true, anonymous_user_ttl_days: 1 });
    await staleGuests(t, short, 2, 2);
    await purge.runOnce();
    expect(await t.db.query(`SELECT 1 FROM users WHERE tenant_id = $1`, [short.id])).toHaveLength(0);
  });

  it('deletes at most 1000 guests per tenant per run, one audit event per run per tenant', async () => {
    const big = await createTenant(t.db, { anonymous_signins_enabled: true, anonymous_user_ttl_days: 30 });
    await staleGuests(t, big, 1003, 45);
    const first = await purge.runOnce();
    expect(first.perTenant.find((x) => x.tenantId === big.id)?.deleted).toBe(1000);
    const second = await purge.runOnce();
    expect(second.perTenant.find((x) => x.tenantId === big.id)?.deleted).toBe(3);
    const audits = await t.db.query<{ metadata: { count: number } }>(`SELECT metadata FROM audit_events WHERE tenant_id = $1 AND type = 'guests.purged' ORDER BY created_at`, [big.id]);
    expect(audits.map((a) => a.metadata.count)).toEqual([1000, 3]);
  });

  it("announces each purged guest to webhooks as user.deleted {user_id, reason: 'guest_retention'}, with the delete, only while an endpoint would get it", async () => {
    const endpoint = (tenantId: string, events: string[], o: { disabled?: boolean; agentId?: string } = {}) =>
      t.db.query(`INSERT INTO webhook_endpoints (tenant_id, url, events, secret_enc, disabled_at, agent_client_id) VALUES ($1, 'https://hooks.example/x', $2, 'x', $3, $4)`, [
        tenantId,
        events,
        o.disabled ? new Date() : null,
        o.agentId ?? null,
      ]);
    const announced = async (tenantId: string) =>
      (await t.db.query<{ topic: string; payload: { user_id: string; reason: string } }>(`SELECT topic, payload FROM outbox WHERE tenant_id = $1 AND event_type = 'user.deleted' ORDER BY id`, [tenantId]));
    const stale = async (tenant: TenantFixture) => {
      await staleGuests(t, tenant, 2, 31);
      return (await t.db.query<{ id: string }>(`SELECT id FROM users WHERE tenant_id = $1 ORDER BY id`, [tenant.id])).map((r) => r.id);
    };
    const opts = { anonymous_signins_enabled: true, anonymous_user_ttl_days: 30 };
    const [subscribed, everything, none, otherEvent, disabled, oneAgent] = await Promise.all([1, 2, 3, 4, 5, 6].map(() => createTenant(t.db, opts)));
    await endpoint(subscribed.id, ['user.deleted']);
    await endpoint(everything.id, ['*']);
    await endpoint(otherEvent.id, ['user.claimed']);
    await endpoint(disabled.id, ['user.deleted'], { disabled: true });
    // filtered to one agent's events: user.deleted names no agent, so it would not get it
    await endpoint(oneAgent.id, ['*'], { agentId: (await createAgent(t.db, oneAgent.id)).id });
    const ids = { subscribed: await stale(subscribed), everything: await stale(everything) };
    for (const tn of [none, otherEvent, disabled, oneAgent]) await stale(tn);

    await purge.runOnce();
    for (const [tn, guests] of [[subscribed, ids.subscribed], [everything, ids.everything]] as const) {
      expect(await t.db.query(`SELECT 1 FROM users WHERE tenant_id = $1`, [tn.id])).toHaveLength(0);
      const rows = await announced(tn.id);
      expect(rows.map((r) => r.topic)).toEqual(['webhook', 'webhook']);
      expect(rows.map((r) => r.payload).sort((a, b) => a.user_id.localeCompare(b.user_id))).toEqual(guests.map((id) => ({ user_id: id, reason: 'guest_retention' })));
    }
    // no endpoint that would receive it: no outbox rows (the guests are purged all the same)
    for (const tn of [none, otherEvent, disabled, oneAgent]) {
      expect(await t.db.query(`SELECT 1 FROM users WHERE tenant_id = $1`, [tn.id])).toHaveLength(0);
      expect(await announced(tn.id)).toEqual([]);
    }
  });
});

// on the file's own database too: it sweeps expired rows and holds the purge's lease, which other
// files on the shared database must not meet
describe('guest purge: concurrency, failures and retention changes during a run', () => {
  let purge: GuestPurgeService;
  beforeAll(() => {
    purge = t.app.get(GuestPurgeService);
  });

  /** Runs `body` (a gate's wait, or a failure) before deleting each user matching `where`; returns the cleanup. */
  async function onUserDelete(where: string, body: string): Promise<() => Promise<void>> {
    const fn = `purge_hook_${Math.random().toString(16).slice(2, 10)}`;
    await t.db.query(`CREATE FUNCTION ${fn}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN ${body}; RETURN OLD; END $$`);
    await t.db.query(`CREATE TRIGGER ${fn} BEFORE DELETE ON users FOR EACH ROW WHEN (${where}) EXECUTE FUNCTION ${fn}()`);
    return async () => {
      await t.db.query(`DROP TRIGGER ${fn} ON users`);
      await t.db.query(`DROP FUNCTION ${fn}()`);
    };
  }
  const left = async (tenant: TenantFixture) => (await t.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM users WHERE tenant_id = $1 AND is_anonymous`, [tenant.id]))[0].n;
  const runRow = async () =>
    (await t.db.query<{ holder: string | null; running_until: Date | null; last_completed_at: Date | null }>(`SELECT holder, running_until, last_completed_at FROM maintenance_runs WHERE job = $1`, [GUEST_PURGE_RUN]))[0];
  async function cliPurge(): Promise<{ code: number; out: string }> {
    const out: string[] = [];
    const io: CliIo = { out: (l) => out.push(l), err: (l) => out.push(l) };
    const saved = process.env.DATABASE_URL;
    process.env.DATABASE_URL = t.databaseUrl;
    resetConfigForTests();
    try {
      return { code: await runCli(['guests:purge'], io), out: out.join('\n') };
    } finally {
      process.env.DATABASE_URL = saved;
      resetConfigForTests();
    }
  }

  it('cli guests:purge that cannot tell Redis exits 1 and says what may linger (the guests are deleted all the same)', async () => {
    const tenant = await createTenant(t.db, { anonymous_signins_enabled: true, anonymous_user_ttl_days: 30 });
    await staleGuests(t, tenant, 2, 45);
    const redisUrl = process.env.REDIS_URL;
    process.env.REDIS_URL = 'redis://127.0.0.1:1'; // nothing listens there
    let cli: { code: number; out: string };
    try {
      cli = await cliPurge();
    } finally {
      process.env.REDIS_URL = redisUrl;
      resetConfigForTests();
    }
    expect(cli.code).toBe(1);
    expect(cli.out).toMatch(new RegExp(`Redis could not be told for \\d+ tenant\\(s\\) \\([^)]*${tenant.id}`));
    expect(cli.out).toMatch(/access tokens may still be accepted for up to \d+ s/);
    expect(await left(tenant)).toBe(0);
  });

  it('one run at a time: a second purge (worker or CLI) while one runs deletes nothing and says so', async () => {
    const big = await createTenant(t.db, { anonymous_signins_enabled: true, anonymous_user_ttl_days: 30 });
    await staleGuests(t, big, 1003, 45);
    // the first run stops at the tenant's first delete until the second (worker, then CLI) has tried
    const gate = await shutGate(t.db);
    const drop = await onUserDelete(`OLD.tenant_id = '${big.id}'`, gate.wait);
    try {
      const first = purge.runOnce();
      first.catch(() => undefined); // awaited below; a failure before then must not go unhandled
      await gate.reached();
      await expect(purge.runOnce()).rejects.toBeInstanceOf(PurgeAlreadyRunningError);
      const cli = await cliPurge();
      expect(cli.code).toBe(1);
      expect(cli.out).toMatch(/a guest purge is already running/);
      await gate.open();
      expect((await first).perTenant.find((x) => x.tenantId === big.id)?.deleted).toBe(1000);
    } finally {
      await gate.open();
      await drop();
    }
    expect(await left(big)).toBe(3);
    // once it has finished, the next run goes ahead
    expect((await purge.runOnce()).perTenant.find((x) => x.tenantId === big.id)?.deleted).toBe(3);
  });

  it('the run lock is a lease row, not connection state (a transaction-mode pooler may run each statement on another server connection): a live lease refuses the run, an expired one (its holder died) is taken over, a finished run releases it and records its completion', async () => {
    const tenant = await createTenant(t.db, { anonymous_signins_enabled: true, anonymous_user_ttl_days: 30 });
    await staleGuests(t, tenant, 2, 45);
    await t.db.query(
      `INSERT INTO maintenance_runs (job, last_completed_at, holder, running_until) VALUES ($1, now() - interval '3 days', 'dead-worker', now() + interval '1 minute')
       ON CONFLICT (job) DO UPDATE SET last_completed_at = EXCLUDED.last_completed_at, holder = EXCLUDED.holder, running_until = EXCLUDED.running_until`,
      [GUEST_PURGE_RUN],
    );
    const before = (await runRow()).last_completed_at!;
    await expect(purge.runOnce()).rejects.toBeInstanceOf(PurgeAlreadyRunningError);
    const cli = await cliPurge();
    expect(cli.code).toBe(1);
    expect(cli.out).toMatch(/a guest purge is already running/);
    expect(await left(tenant)).toBe(2);
    expect(await runRow()).toMatchObject({ holder: 'dead-worker', last_completed_at: before });
    // the holder died: its lease runs out and the next run takes it over
    await t.db.query(`UPDATE maintenance_runs SET running_until = now() - interval '1 second' WHERE job = $1`, [GUEST_PURGE_RUN]);
    expect((await purge.runOnce()).perTenant.find((x) => x.tenantId === tenant.id)?.deleted).toBe(2);
    const row = await runRow();
    expect(row).toMatchObject({ holder: null, running_until: null });
    expect(Date.now() - row.last_completed_at!.getTime()).toBeLessThan(60_000);
  });

  it("a run under the lease's own holder (the retry or stalled re-run of the worker job whose attempt died mid-run) reclaims it at once; another holder's run is refused, told how long the lease still runs", async () => {
    const tenant = await createTenant(t.db, { anonymous_signins_enabled: true, anonymous_user_ttl_days: 30 });
    await staleGuests(t, tenant, 2, 45);
    await t.db.query(
      `INSERT INTO maintenance_runs (job, last_completed_at, holder, running_until) VALUES ($1, now() - interval '3 days', 'bullmq:job-1', now() + interval '10 minutes')
       ON CONFLICT (job) DO UPDATE SET last_completed_at = EXCLUDED.last_completed_at, holder = EXCLUDED.holder, running_until = EXCLUDED.running_until`,
      [GUEST_PURGE_RUN],
    );
    try {
      const refused = await purge.runOnce({ holder: 'bullmq:job-2' }).catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(PurgeAlreadyRunningError);
      expect((refused as PurgeAlreadyRunningError).heldForMs).toBeGreaterThan(9 * 60_000);
      expect(await left(tenant)).toBe(2);
      const cli = await cliPurge();
      expect(cli.code).toBe(1);
      expect(cli.out).toMatch(/a guest purge is already running/);
      expect((await purge.runOnce({ holder: 'bullmq:job-1' })).perTenant.find((x) => x.tenantId === tenant.id)?.deleted).toBe(2);
    } finally {
      // a failure here leaves no lease behind for the next tests
      await t.db.query(`UPDATE maintenance_runs SET holder = NULL, running_until = NULL WHERE job = $1 AND holder = 'bullmq:job-1'`, [GUEST_PURGE_RUN]);
    }
    const row = await runRow();
    expect(row).toMatchObject({ holder: null, running_until: null });
    expect(Date.now() - row.last_completed_at!.getTime()).toBeLessThan(60_000);
  });

  it('the lease is renewed while a step of the run goes on, however long it takes (a slow batch): no other run takes it over meanwhile', async () => {
    const job = `test-heartbeat-${Math.random().toString(16).slice(2, 8)}`;
    let other: RunLeaseResult<void> | undefined;
    // a 2 s lease renewed every 400 ms: a beat may come 1.6 s late (a loaded machine) and still hold it
    const r = await withRunLease(t.db, job, 2000, async () => {
      // one step three leases long, and another run trying meanwhile
      await new Promise((res) => setTimeout(res, 6000));
      other = await withRunLease(t.db, job, 2000, async () => undefined);
      return 'done';
    });
    expect(r).toEqual({ acquired: true, result: 'done' });
    expect(other).toMatchObject({ acquired: false });
    const [row] = await t.db.query<{ holder: string | null; last_completed_at: Date | null }>(`SELECT holder, last_completed_at FROM maintenance_runs WHERE job = $1`, [job]);
    expect(row.holder).toBeNull();
    expect(row.last_completed_at).not.toBeNull();
  });

  it('the lease is held in the row while the run goes on, renewed after each tenant; a run whose lease another took over (it expired) stops and records nothing', async () => {
    const a = await createTenant(t.db, { anonymous_signins_enabled: true, anonymous_user_ttl_days: 30 });
    const b = await createTenant(t.db, { anonymous_signins_enabled: true, anonymous_user_ttl_days: 30 });
    const [first, second] = [a, b].sort((x, y) => (x.id < y.id ? -1 : 1)); // the run goes in tenant id order
    await staleGuests(t, first, 1, 45);
    await staleGuests(t, second, 2, 45);
    const before = (await runRow())?.last_completed_at ?? null;
    // the run stops inside the first tenant's delete until the lease has been taken over
    const gate = await shutGate(t.db);
    const drop = await onUserDelete(`OLD.tenant_id = '${first.id}'`, gate.wait);
    try {
      const run = purge.runOnce();
      run.catch(() => undefined);
      await gate.reached();
      const held = await runRow();
      expect(held.holder).toEqual(expect.any(String));
      expect(held.running_until!.getTime()).toBeGreaterThan(Date.now());
      // and nothing tied to a server connection (a session advisory lock would stay with the
      // connection a transaction-mode pooler happened to hand out); the test's gate aside
      expect(
        await t.db.query(`SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) AND ${gate.notThisGate}`),
      ).toHaveLength(0);
      // as if its lease had run out and another run had taken it
      await t.db.query(`UPDATE maintenance_runs SET holder = 'other-run', running_until = now() + interval '1 minute' WHERE job = $1`, [GUEST_PURGE_RUN]);
      await gate.open();
      await expect(run).rejects.toBeInstanceOf(RunLeaseLostError);
    } finally {
      await gate.open();
      await drop();
    }
    expect(await left(first)).toBe(0); // the tenant in progress finished
    expect(await left(second)).toBe(2); // the rest is the other run's
    expect(await runRow()).toMatchObject({ holder: 'other-run', last_completed_at: before });
    await t.db.query(`UPDATE maintenance_runs SET holder = NULL, running_until = NULL WHERE job = $1`, [GUEST_PURGE_RUN]);
  });

  it("a tenant whose delete fails is logged and skipped; the run goes on with the other tenants, and the next run takes it", async () => {
    const broken = await createTenant(t.db, { anonymous_signins_enabled: true, anonymous_user_ttl_days: 30 });
    const fine = await createTenant(t.db, { anonymous_signins_enabled: true, anonymous_user_ttl_days: 30 });
    await staleGuests(t, broken, 2, 45);
    await staleGuests(t, fine, 2, 45);
    const drop = await onUserDelete(`OLD.tenant_id = '${broken.id}'`, `RAISE EXCEPTION 'disk on fire'`);
    let r;
    let cli;
    try {
      r = await purge.runOnce();
      // the CLI says so and exits 1: a partial run is not a success
      await staleGuests(t, fine, 1, 45);
      cli = await cliPurge();
    } finally {
      await drop();
    }
    expect(r.failedTenants).toContain(broken.id);
    expect(r.perTenant.find((x) => x.tenantId === fine.id)?.deleted).toBe(2);
    expect(cli.code).toBe(1);
    expect(cli.out).toMatch(/purged \d+ guest/);
    expect(cli.out).toContain(broken.id);
    expect(await left(broken)).toBe(2);
    expect(await left(fine)).toBe(0);
    expect((await purge.runOnce()).perTenant.find((x) => x.tenantId === broken.id)?.deleted).toBe(2);
  });

  it("a tenant's retention raised while the run is under way (before its turn) applies to that tenant", async () => {
    const a = await createTenant(t.db, { anonymous_signins_enabled: true, anonymous_user_ttl_days: 30 });
    const b = await createTenant(t.db, { anonymous_signins_enabled: true, anonymous_user_ttl_days: 30 });
    const [first, second] = [a, b].sort((x, y) => (x.id < y.id ? -1 : 1)); // the run goes in tenant id order
    await staleGuests(t, first, 1, 45);
    await staleGuests(t, second, 2, 45);
    // the run stops inside the first tenant's delete (it listed both tenants before) until the change is made
    const gate = await shutGate(t.db);
    const drop = await onUserDelete(`OLD.tenant_id = '${first.id}'`, gate.wait);
    try {
      const run = purge.runOnce();
      run.catch(() => undefined); // awaited below; a failure before then must not go unhandled
      await gate.reached();
      await t.db.query(`UPDATE tenants SET anonymous_user_ttl_days = 60 WHERE id = $1`, [second.id]);
      await gate.open();
      const r = await run;
      expect(r.perTenant.find((x) => x.tenantId === first.id)?.deleted).toBe(1);
      expect(r.perTenant.find((x) => x.tenantId === second.id)?.deleted ?? 0).toBe(0);
    } finally {
      await gate.open();
      await drop();
    }
    expect(await left(second)).toBe(2);
  });

  it('the purge and the hourly sweep of expired refresh tokens never deadlock (same lock order)', async () => {
    const tenant = await createTenant(t.db, { anonymous_signins_enabled: true, anonymous_user_ttl_days: 30 });
    // a stale guest whose refresh token expired two days ago: both jobs want its session and token
    const [u] = await t.db.query<{ id: string }>(
      `INSERT INTO users (tenant_id, is_anonymous, last_active_at, created_at) VALUES ($1, true, now() - interval '45 days', now() - interval '45 days') RETURNING id`,
      [tenant.id],
    );
    const [s] = await t.db.query<{ id: string }>(`INSERT INTO user_sessions (tenant_id, user_id) VALUES ($1, $2) RETURNING id`, [tenant.id, u.id]);
    await t.db.query(`INSERT INTO refresh_tokens (session_id, tenant_id, user_id, secret_hash, expires_at) VALUES ($1, $2, $3, 'x', now() - interval '2 days')`, [s.id, tenant.id, u.id]);
    // the purge holds the guest and its session, then waits before its cascade reaches the token
    const gate = await shutGate(t.db);
    const drop = await onUserDelete(`OLD.id = '${u.id}'`, gate.wait);
    try {
      const run = purge.runOnce();
      run.catch(() => undefined); // awaited below; a failure before then must not go unhandled
      const purgePid = await gate.reached();
      const sweeper = new ExpiredRowsSweeper(t.db, t.app.get<AppConfig>(APP_CONFIG));
      const sweep = sweeper.runOnce();
      sweep.catch(() => undefined);
      // the sweep runs while the purge holds them: until it waits for the purge, or is done
      await blockedByOrSettled(t, purgePid, sweep);
      await gate.open();
      const [purged, swept] = await Promise.all([run, sweep]);
      expect(purged.failedTenants).toEqual([]);
      expect(purged.perTenant.find((x) => x.tenantId === tenant.id)?.deleted).toBe(1);
      expect(swept).toBeDefined();
    } finally {
      await gate.open();
      await drop();
    }
    expect(await t.db.query(`SELECT 1 FROM refresh_tokens WHERE session_id = $1`, [s.id])).toHaveLength(0);
  });
});

describe('guest purge schedule (worker)', () => {
  @Module({ imports: [KernelModule, GuestsWorkerModule] })
  class PurgeWorkerTestModule {}

  it('registers one daily 02:30 UTC job scheduler however many workers start', async () => {
    // on the file's database: a worker start on a database where no purge completed lately runs
    // one at once (its catch-up), which on the shared database would purge other files' guests
    const start = () => withEnv({ DATABASE_URL: t.databaseUrl }, () => NestFactory.createApplicationContext(PurgeWorkerTestModule, { logger: false }));
    const a = await start();
    const b = await start();
    const conn = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', { maxRetriesPerRequest: null });
    const queue = new Queue(MAINTENANCE_QUEUE, { connection: conn, prefix: `${process.env.REDIS_KEY_PREFIX}bull` });
    try {
      const schedulers = await queue.getJobSchedulers();
      expect(schedulers.filter((s) => s.key === GUEST_PURGE_SCHEDULER_ID || s.id === GUEST_PURGE_SCHEDULER_ID)).toHaveLength(1);
      const s = schedulers[0];
      expect(s.pattern).toBe('30 2 * * *');
      expect(s.tz).toBe('UTC');
      const next = new Date((await a.get(GuestPurgeScheduler).nextRun())!);
      expect(next.getUTCHours()).toBe(2);
      expect(next.getUTCMinutes()).toBe(30);
    } finally {
      await queue.close();
      conn.disconnect();
      await a.close();
      await b.close();
    }
  });
});
