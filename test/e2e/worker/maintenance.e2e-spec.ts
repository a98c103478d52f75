import { randomBytes, randomUUID } from 'crypto';
import { Queue } from 'bullmq';
import Redis from 'ioredis';
import { CliIo, runCli } from '../../../src/cli';
import { resetConfigForTests } from '../../../src/config/config.module';
import { GUEST_PURGE_SCHEDULER_ID } from '../../../src/modules/guests/purge/guest-purge.scheduler';
import { EXPIRED_ROWS_SCHEDULER_ID, expiredRowRules, ExpiredRowsSweeper } from '../../../src/shared/maintenance/expired-rows.sweeper';
import { sha256Hex } from '../../../src/shared/crypto/tokens';
import { APP_CONFIG, AppConfig } from '../../../src/config/config';
import { Db } from '../../../src/shared/db/db.service';
import { MAINTENANCE_QUEUE } from '../../../src/shared/maintenance/maintenance.scheduler';
import { createAgent } from '../../factories/agent.factory';
import { signupTenant } from '../../factories/dashboard.factory';
import { createTenant } from '../../factories/tenant.factory';
import { MailWorld, register, startMailWorld } from '../account-security/account-security.helpers';

/**
 * The hourly sweep of expired one-time rows (worker maintenance job). Each table gets a row
 * expired two days ago (deleted), one expired an hour ago (kept: one day of retention) and a
 * live one (kept).
 */
describe('worker maintenance: expired one-time rows', () => {
  let w: MailWorld;
  beforeAll(async () => {
    w = await startMailWorld();
  }, 60_000);
  afterAll(() => w?.close());

  let refreshOf: { apiKey: string; token: string };
  const AGES = { old: `now() - interval '2 days'`, recent: `now() - interval '1 hour'`, live: `now() + interval '1 hour'` } as const;
  type Age = keyof typeof AGES;

  async function seed(): Promise<Record<string, Record<Age, string>>> {
    const db = w.t.db;
    const tenant = await createTenant(db);
    const u = await register(w.t, tenant.apiKey);
    const agent = await createAgent(db, tenant.id);
    const d = await signupTenant(w.t);
    const ids: Record<string, Record<Age, string>> = {};
    for (const age of Object.keys(AGES) as Age[]) {
      const at = AGES[age];
      const hex = () => randomBytes(16).toString('hex');
      const put = async (table: string, sql: string, params: unknown[]) => {
        const [r] = await db.query<{ id: string }>(sql, params);
        (ids[table] ??= {} as Record<Age, string>)[age] = String(r.id);
      };
      await put('account_tokens', `INSERT INTO account_tokens (tenant_id, user_id, kind, token_hash, email_normalized, expires_at) VALUES ($1, $2, 'password_reset', $3, $4, ${at}) RETURNING id`, [tenant.id, u.id, hex(), u.email]);
      await put('email_otp_codes', `INSERT INTO email_otp_codes (tenant_id, purpose, email_normalized, code_hash, salt, expires_at) VALUES ($1, 'login', $2, $3, $4, ${at}) RETURNING id`, [tenant.id, `${hex()}@example.com`, hex(), hex()]);
      await put('mfa_challenges', `INSERT INTO mfa_challenges (token_hash, tenant_id, user_id, expires_at) VALUES ($1, $2, $3, ${at}) RETURNING id`, [hex(), tenant.id, u.id]);
      await put('idempotency_keys', `INSERT INTO idempotency_keys (scope, key, request_hash, expires_at) VALUES ('test', $1, $2, ${at}) RETURNING key AS id`, [hex(), hex()]);
      await put('agent_denylist', `INSERT INTO agent_denylist (tenant_id, agent_client_id, reason, expires_at) VALUES ($1, $2, 'tokens_killed', ${at}) RETURNING id`, [tenant.id, agent.id]);
      await put('revoked_access_tokens', `INSERT INTO revoked_access_tokens (jti, tenant_id, expires_at) VALUES ($1, $2, ${at}) RETURNING jti AS id`, [randomUUID(), tenant.id]);
      await put('dashboard_sessions', `INSERT INTO dashboard_sessions (token_hash, user_id, csrf_token, absolute_expires_at) VALUES ($1, $2, $3, ${at}) RETURNING id`, [hex(), d.userId, hex()]);
      // one live link per account: the older ones were used
      await put('dashboard_password_resets', `INSERT INTO dashboard_password_resets (user_id, token_hash, expires_at, used_at) VALUES ($1, $2, ${at}, $3) RETURNING id`, [d.userId, hex(), age === 'live' ? null : new Date()]);
      await put('dashboard_invites', `INSERT INTO dashboard_invites (tenant_id, email, email_normalized, role, token_hash, invited_by, expires_at) VALUES ($1, $2, $2, 'member', $3, $4, ${at}) RETURNING id`, [d.tenantId, `${hex()}@example.com`, hex(), d.userId]);
    }
    // dashboard sessions also end by revocation and by idleness
    const [revoked] = await db.query<{ id: string }>(`INSERT INTO dashboard_sessions (token_hash, user_id, csrf_token, absolute_expires_at, revoked_at) VALUES ($1, $2, $3, now() + interval '1 hour', now() - interval '2 days') RETURNING id`, [randomUUID(), d.userId, randomUUID()]);
    const [idle] = await db.query<{ id: string }>(`INSERT INTO dashboard_sessions (token_hash, user_id, csrf_token, absolute_expires_at, last_seen_at) VALUES ($1, $2, $3, now() + interval '1 hour', now() - interval '3 days') RETURNING id`, [randomUUID(), d.userId, randomUUID()]);
    const [signedIn] = await db.query<{ id: string }>(`SELECT id FROM dashboard_sessions WHERE user_id = $1 ORDER BY created_at LIMIT 1`, [d.userId]);
    ids.dashboard_sessions_ended = { old: revoked.id, recent: idle.id, live: signedIn.id };
    // end-user sessions (created long ago), each with one refresh token of that age
    for (const age of Object.keys(AGES) as Age[]) {
      const sid = randomUUID();
      await db.query(`INSERT INTO user_sessions (id, tenant_id, user_id, created_at) VALUES ($1, $2, $3, now() - interval '40 days')`, [sid, tenant.id, u.id]);
      const [r] = await db.query<{ id: string }>(
        `INSERT INTO refresh_tokens (session_id, tenant_id, user_id, secret_hash, expires_at) VALUES ($1, $2, $3, $4, ${AGES[age]}) RETURNING id`,
        [sid, tenant.id, u.id, randomBytes(32).toString('hex')],
      );
      (ids.user_sessions ??= {} as Record<Age, string>)[age] = sid;
      (ids.refresh_tokens ??= {} as Record<Age, string>)[age] = r.id;
    }
    // a session revoked two days ago (its token revoked with it, not yet expired): both go (the token by cascade)
    const endedSid = randomUUID();
    await db.query(`INSERT INTO user_sessions (id, tenant_id, user_id, revoked_at) VALUES ($1, $2, $3, now() - interval '2 days')`, [endedSid, tenant.id, u.id]);
    const [endedToken] = await db.query<{ id: string }>(
      `INSERT INTO refresh_tokens (session_id, tenant_id, user_id, secret_hash, expires_at, revoked_at) VALUES ($1, $2, $3, $4, now() + interval '20 days', now() - interval '2 days') RETURNING id`,
      [endedSid, tenant.id, u.id, randomBytes(32).toString('hex')],
    );
    // a live session whose rotated parent expired two days ago: the parent goes, the child still refreshes
    const liveSid = randomUUID();
    const childSecret = randomBytes(32).toString('base64url').slice(0, 43);
    await db.query(`INSERT INTO user_sessions (id, tenant_id, user_id, created_at) VALUES ($1, $2, $3, now() - interval '40 days')`, [liveSid, tenant.id, u.id]);
    const [parent] = await db.query<{ id: string }>(
      `INSERT INTO refresh_tokens (session_id, tenant_id, user_id, secret_hash, expires_at, rotated_at) VALUES ($1, $2, $3, $4, now() - interval '2 days', now() - interval '32 days') RETURNING id`,
      [liveSid, tenant.id, u.id, randomBytes(32).toString('hex')],
    );
    const [child] = await db.query<{ id: string }>(
      `INSERT INTO refresh_tokens (session_id, tenant_id, user_id, secret_hash, expires_at, parent_id) VALUES ($1, $2, $3, $4, now() + interval '1 day', $5) RETURNING id`,
      [liveSid, tenant.id, u.id, sha256Hex(childSecret), parent.id],
    );
    ids.user_sessions_ended = { old: endedSid, recent: liveSid, live: liveSid };
    ids.refresh_tokens_ended = { old: endedToken.id, recent: parent.id, live: child.id };
    refreshOf = { apiKey: tenant.apiKey, token: `${child.id}:${childSecret}` };
    return ids;
  }

  const exists = async (table: string, id: string) => {
    const col = table === 'idempotency_keys' ? 'key' : table === 'revoked_access_tokens' ? 'jti' : 'id';
    return (await w.t.db.query(`SELECT 1 FROM ${table} WHERE ${col}::text = $1`, [id])).length === 1;
  };

  it('deletes rows expired more than a day ago, keeps the recently expired and the live ones', async () => {
    const ids = await seed();
    const r = await w.worker.get(ExpiredRowsSweeper).runOnce();
    for (const table of ['account_tokens', 'email_otp_codes', 'mfa_challenges', 'idempotency_keys', 'agent_denylist', 'revoked_access_tokens', 'dashboard_password_resets', 'dashboard_invites', 'dashboard_sessions', 'refresh_tokens', 'user_sessions']) {
      expect(r[table]).toBeGreaterThanOrEqual(1);
      expect(await exists(table, ids[table].old)).toBe(false);
      expect(await exists(table, ids[table].recent)).toBe(true);
      expect(await exists(table, ids[table].live)).toBe(true);
    }
    expect(await exists('dashboard_sessions', ids.dashboard_sessions_ended.old)).toBe(false); // revoked two days ago
    expect(await exists('dashboard_sessions', ids.dashboard_sessions_ended.recent)).toBe(false); // idle for three days
    expect(await exists('dashboard_sessions', ids.dashboard_sessions_ended.live)).toBe(true); // the owner's sign-in
    for (const table of ['refresh_tokens', 'user_sessions']) {
      expect(await exists(table, ids[table].old)).toBe(false); // expired two days ago / no token left
      expect(await exists(table, ids[table].recent)).toBe(true);
      expect(await exists(table, ids[table].live)).toBe(true);
    }
    expect(await exists('user_sessions', ids.user_sessions_ended.old)).toBe(false); // revoked two days ago
    expect(await exists('refresh_tokens', ids.refresh_tokens_ended.old)).toBe(false); // went with its session
    expect(await exists('refresh_tokens', ids.refresh_tokens_ended.recent)).toBe(false); // the rotated, expired parent
    expect(await exists('refresh_tokens', ids.refresh_tokens_ended.live)).toBe(true);
    expect(await exists('user_sessions', ids.user_sessions_ended.live)).toBe(true);
    // the session goes on: its live child still rotates
    await w.t.http().post('/v1/auth/refresh').set('X-API-Key', refreshOf.apiKey).set('X-Forwarded-For', '10.9.9.9').send({ refresh_token: refreshOf.token }).expect(200);
    // a second run finds nothing more
    const again = await w.worker.get(ExpiredRowsSweeper).runOnce();
    expect(Object.values(again).reduce((a, b) => a + b, 0)).toBe(0);
  });

  it('deletes settled outbox rows (their encrypted secrets with them) past OUTBOX_RETENTION_DAYS and finished webhook deliveries past WEBHOOK_DELIVERY_RETENTION_DAYS', async () => {
    const db = w.t.db;
    const tenant = await createTenant(db);
    /** `dispatchedDaysAgo`: when the relay handed it to the queue (null: not yet; default: when it was created) */
    const outbox = async (createdDaysAgo: number, processedDaysAgo: number | null, dispatchedDaysAgo: number | null = createdDaysAgo) =>
      (
        await db.query<{ id: string }>(
          `INSERT INTO outbox (tenant_id, topic, event_type, payload, secret_enc, created_at, dispatched_at, processed_at)
           VALUES ($1, 'retention-test', 'retention.test', '{}', 'enc:secret', now() - make_interval(days => $2),
                   CASE WHEN $4::int IS NULL THEN NULL ELSE now() - make_interval(days => $4::int) END,
                   CASE WHEN $3::int IS NULL THEN NULL ELSE now() - make_interval(days => $3::int) END) RETURNING id::text AS id`,
          [tenant.id, createdDaysAgo, processedDaysAgo, dispatchedDaysAgo],
        )
      )[0].id;
    const oldSettled = await outbox(8, 8);
    const recentSettled = await outbox(2, 2);
    // never settled (its consumer could not record it, or Redis lost its job after the
    // reconciler's window): nothing will send it any more once this old, so it goes too
    const oldUnsettled = await outbox(8, null);
    const recentUnsettled = await outbox(2, null);
    // not handed to the queue yet, or only now (the worker was down longer than the retention): the
    // relay still sends it, so it stays (review: a worker back from a long outage swept unsent events)
    const oldUndispatched = await outbox(8, null, null);
    const oldJustDispatched = await outbox(8, null, 0);
    const [ep] = await db.query<{ id: string }>(`INSERT INTO webhook_endpoints (tenant_id, url, events, secret_enc) VALUES ($1, 'https://hooks.example.com/x', '{user.created}', 'enc') RETURNING id`, [tenant.id]);
    const delivery = async (status: string, daysAgo: number) =>
      (
        await db.query<{ id: string }>(
          `INSERT INTO webhook_deliveries (tenant_id, endpoint_id, outbox_id, message_id, event_type, body, status, created_at)
           VALUES ($1, $2, (random() * 1e12)::bigint, 'msg', 'user.created', '{}', $3, now() - make_interval(days => $4)) RETURNING id`,
          [tenant.id, ep.id, status, daysAgo],
        )
      )[0].id;
    const oldDelivered = await delivery('delivered', 31);
    const oldFailed = await delivery('failed', 31);
    const oldPending = await delivery('pending', 31);
    const recentDelivered = await delivery('delivered', 29);

    const r = await w.worker.get(ExpiredRowsSweeper).runOnce();
    expect(r.outbox).toBeGreaterThanOrEqual(1);
    expect(r.webhook_deliveries).toBeGreaterThanOrEqual(2);
    const outboxLeft = (
      await db.query<{ id: string }>(`SELECT id::text AS id FROM outbox WHERE id = ANY($1::bigint[])`, [[oldSettled, recentSettled, oldUnsettled, recentUnsettled, oldUndispatched, oldJustDispatched]])
    ).map((x) => x.id);
    expect(outboxLeft.sort()).toEqual([recentSettled, recentUnsettled, oldUndispatched, oldJustDispatched].sort());
    const deliveriesLeft = (await db.query<{ id: string }>(`SELECT id FROM webhook_deliveries WHERE endpoint_id = $1`, [ep.id])).map((x) => x.id);
    expect(deliveriesLeft.sort()).toEqual([oldPending, recentDelivered].sort());
    expect(deliveriesLeft).not.toContain(oldDelivered);
    expect(deliveriesLeft).not.toContain(oldFailed);
  });

  it('with OUTBOX_RETENTION_DAYS=1, an unsettled row stays while a mail may still be retried (3 days after it was handed over); a settled one goes after the day', async () => {
    const db = w.t.db;
    const tenant = await createTenant(db);
    const outbox = async (createdHoursAgo: number, processedHoursAgo: number | null) =>
      (
        await db.query<{ id: string }>(
          `INSERT INTO outbox (tenant_id, topic, event_type, payload, created_at, dispatched_at, processed_at)
           VALUES ($1, 'retention-test', 'retention.test', '{}', now() - make_interval(hours => $2), now() - make_interval(hours => $2),
                   CASE WHEN $3::int IS NULL THEN NULL ELSE now() - make_interval(hours => $3::int) END) RETURNING id::text AS id`,
          [tenant.id, createdHoursAgo, processedHoursAgo],
        )
      )[0].id;
    // a mail whose SMTP relay was down for a night: 26 h into its retries (about 25 h, plus jitter)
    const retrying = await outbox(26, null);
    const settled = await outbox(26, 25);
    const lost = await outbox(80, null);
    // the sweep's rule with a one-day retention, on these rows only (the database is shared)
    const rule = expiredRowRules({ ...w.worker.get<AppConfig>(APP_CONFIG), OUTBOX_RETENTION_DAYS: 1 }).find((r) => r.table === 'outbox')!;
    const swept = await db.query<{ id: string }>(`DELETE FROM outbox WHERE id = ANY($1::bigint[]) AND ${rule.expired} RETURNING id::text AS id`, [[retrying, settled, lost]]);
    expect(swept.map((r) => r.id).sort()).toEqual([settled, lost].sort());
  });

  it("deletes who was counted in months before the previous one (tenant_mau_users); the previous and current months' stay, and the counts", async () => {
    const db = w.t.db;
    const tenant = await createTenant(db);
    const monthsAgo = async (n: number) =>
      (
        await db.query<{ user_id: string }>(
          `INSERT INTO tenant_mau_users (tenant_id, month, user_id)
           VALUES ($1, (date_trunc('month', now() AT TIME ZONE 'UTC') - make_interval(months => $2))::date, gen_random_uuid()) RETURNING user_id`,
          [tenant.id, n],
        )
      )[0].user_id;
    const [old, previous, current] = [await monthsAgo(3), await monthsAgo(1), await monthsAgo(0)];
    await db.query(`INSERT INTO tenant_mau (tenant_id, month, active_users) VALUES ($1, (date_trunc('month', now() AT TIME ZONE 'UTC') - interval '3 months')::date, 1)`, [tenant.id]);
    const r = await w.worker.get(ExpiredRowsSweeper).runOnce();
    expect(r.tenant_mau_users).toBeGreaterThanOrEqual(1);
    const left = (await db.query<{ user_id: string }>(`SELECT user_id FROM tenant_mau_users WHERE tenant_id = $1`, [tenant.id])).map((x) => x.user_id);
    expect(left.sort()).toEqual([previous, current].sort());
    expect(left).not.toContain(old);
    expect(await db.query(`SELECT 1 FROM tenant_mau WHERE tenant_id = $1`, [tenant.id])).toHaveLength(1);
  });

  it('clears a webhook secret a rotation replaced once its overlap ended; one still in its overlap stays', async () => {
    const db = w.t.db;
    const tenant = await createTenant(db);
    const endpoint = async (overlapEndsInSeconds: number) =>
      (
        await db.query<{ id: string }>(
          `INSERT INTO webhook_endpoints (tenant_id, url, events, secret_enc, previous_secret_enc, previous_secret_expires_at)
           VALUES ($1, 'https://hooks.example.com/x', '{user.created}', 'enc', 'old-enc', now() + make_interval(secs => $2)) RETURNING id`,
          [tenant.id, overlapEndsInSeconds],
        )
      )[0].id;
    const ended = await endpoint(-1);
    const running = await endpoint(3600);
    const r = await w.worker.get(ExpiredRowsSweeper).runOnce();
    expect(r.webhook_previous_secrets).toBeGreaterThanOrEqual(1);
    const rows = await db.query<{ id: string; previous_secret_enc: string | null; previous_secret_expires_at: Date | null }>(
      `SELECT id, previous_secret_enc, previous_secret_expires_at FROM webhook_endpoints WHERE id = ANY($1::uuid[])`,
      [[ended, running]],
    );
    expect(rows.find((x) => x.id === ended)).toMatchObject({ previous_secret_enc: null, previous_secret_expires_at: null });
    expect(rows.find((x) => x.id === running)).toMatchObject({ previous_secret_enc: 'old-enc', previous_secret_expires_at: expect.any(Date) });
  });

  it('deletes audit events and agent actions past AUDIT_RETENTION_DAYS and AGENT_ACTIVITY_RETENTION_DAYS; keeps them all when 0 (the default)', async () => {
    const db = w.t.db;
    const tenant = await createTenant(db);
    const agent = await createAgent(db, tenant.id);
    const audit = async (daysAgo: number) =>
      (await db.query<{ id: string }>(`INSERT INTO audit_events (tenant_id, type, actor_type, created_at) VALUES ($1, 'retention.test', 'system', now() - make_interval(days => $2)) RETURNING id`, [tenant.id, daysAgo]))[0].id;
    const action = async (daysAgo: number) =>
      (await db.query<{ id: string }>(`INSERT INTO agent_actions (tenant_id, agent_client_id, action, created_at) VALUES ($1, $2, 'token_exchange', now() - make_interval(days => $3)) RETURNING id`, [tenant.id, agent.id, daysAgo]))[0].id;
    const audits = { old: await audit(91), recent: await audit(89) };
    const actions = { old: await action(31), recent: await action(29) };
    const left = async () => ({
      audit: (await db.query<{ id: string }>(`SELECT id FROM audit_events WHERE tenant_id = $1 AND type = 'retention.test'`, [tenant.id])).map((x) => x.id).sort(),
      actions: (await db.query<{ id: string }>(`SELECT id FROM agent_actions WHERE agent_client_id = $1`, [agent.id])).map((x) => x.id).sort(),
    });
    const config = w.worker.get<AppConfig>(APP_CONFIG);
    expect(config).toMatchObject({ AUDIT_RETENTION_DAYS: 0, AGENT_ACTIVITY_RETENTION_DAYS: 0 });
    // the default: history is kept
    await w.worker.get(ExpiredRowsSweeper).runOnce();
    expect(await left()).toEqual({ audit: Object.values(audits).sort(), actions: Object.values(actions).sort() });

    const sweeper = new ExpiredRowsSweeper(w.worker.get(Db), { ...config, AUDIT_RETENTION_DAYS: 90, AGENT_ACTIVITY_RETENTION_DAYS: 30 });
    const r = await sweeper.runOnce();
    expect(r.audit_events).toBeGreaterThanOrEqual(1);
    expect(r.agent_actions).toBeGreaterThanOrEqual(1);
    expect(await left()).toEqual({ audit: [audits.recent], actions: [actions.recent] });
  });

  it('the worker schedules it hourly beside the daily guest purge (one maintenance queue, fixed ids)', async () => {
    const conn = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', { maxRetriesPerRequest: null });
    const queue = new Queue(MAINTENANCE_QUEUE, { connection: conn, prefix: `${process.env.REDIS_KEY_PREFIX}bull` });
    try {
      const schedulers = await queue.getJobSchedulers();
      const byId = (id: string) => schedulers.filter((s) => s.key === id || s.id === id);
      expect(byId(EXPIRED_ROWS_SCHEDULER_ID)).toHaveLength(1);
      expect(byId(EXPIRED_ROWS_SCHEDULER_ID)[0]).toMatchObject({ pattern: '17 * * * *', tz: 'UTC' });
      expect(byId(GUEST_PURGE_SCHEDULER_ID)).toHaveLength(1);
    } finally {
      await queue.close();
      conn.disconnect();
    }
  });

  it('cli maintenance:sweep runs it now', async () => {
    const ids = await seed();
    const saved = process.env.DATABASE_URL;
    process.env.DATABASE_URL = w.isolated.url;
    resetConfigForTests();
    const out: string[] = [];
    const io: CliIo = { out: (l) => out.push(l), err: (l) => out.push(l) };
    try {
      expect(await runCli(['maintenance:sweep'], io)).toBe(0);
    } finally {
      process.env.DATABASE_URL = saved;
      resetConfigForTests();
    }
    expect(out.join('\n')).toMatch(/^swept refresh_tokens 2, user_sessions 2, account_tokens 1, email_otp_codes 1, mfa_challenges 1, idempotency_keys 1, agent_denylist 1, revoked_access_tokens 1, dashboard_password_resets 1, dashboard_invites 1, dashboard_sessions 3, outbox 0, tenant_mau_users 0, webhook_deliveries 0, webhook_previous_secrets 0$/m);
    expect(await exists('account_tokens', ids.account_tokens.old)).toBe(false);
  });
});
