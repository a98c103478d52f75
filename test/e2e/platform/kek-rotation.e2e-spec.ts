import { randomBytes } from 'crypto';
import { INestApplicationContext } from '@nestjs/common';
import { Queue } from 'bullmq';
import Redis from 'ioredis';
import { Pool } from 'pg';
import { CliIo, runCli } from '../../../src/cli';
import { AppConfig } from '../../../src/config/config';
import { EnvelopeCipher, kekFingerprint } from '../../../src/shared/crypto/envelope-cipher';
import { ENVELOPE_COLUMNS } from '../../../src/shared/crypto/kek-rewrap.service';
import { EventsService } from '../../../src/shared/events/events.service';
import { createTestApp, randomIp, STRONG_PASSWORD, TestApp, uniqueEmail } from '../../setup/app';
import { createIsolatedDatabase, IsolatedDatabase } from '../../setup/isolated-db';
import { withEnv } from '../../setup/with-env';
import { startWorkerWith } from '../../setup/worker';
import { TenantWithKey, tenantWithKey } from '../account-security/account-security.helpers';
import { mfaApi, TotpDevice } from '../mfa/mfa.helpers';
import { insertAgentClient, Receiver, sleep, verifyStandardWebhook } from '../webhooks/webhook-helpers';

// TOTP sign-ins in three phases may wait for the next 30 s step
jest.setTimeout(240_000);

const A = randomBytes(32).toString('base64');
const B = randomBytes(32).toString('base64');
const cipherOf = (...keys: string[]) =>
  new EnvelopeCipher({ keyEncryptionKey: Buffer.from(keys[0], 'base64'), previousKeyEncryptionKeys: keys.slice(1).map((k) => Buffer.from(k, 'base64')) } as unknown as AppConfig);
const SID = `AC${'0123456789abcdef'.repeat(2)}`;
const MSID = `MG${'fedcba9876543210'.repeat(2)}`;
const TWILIO_TOKEN = 'tw-auth-token-kek-rotation-0123456789';
const DOB = '1990-04-01';

/**
 * Rotating KEY_ENCRYPTION_KEY (README "Rotating KEY_ENCRYPTION_KEY"): data written under key A is
 * served by instances running with B and A in KEY_ENCRYPTION_KEY_PREVIOUS; `kek:rewrap` moves
 * every envelope under B, after which B alone serves it, except recovery codes hashed under A
 * (reported by the CLI), which fail once A is gone.
 */
describe('KEY_ENCRYPTION_KEY rotation: KEY_ENCRYPTION_KEY_PREVIOUS and kek:rewrap', () => {
  let db: IsolatedDatabase;
  /** the database read directly, whichever app runs */
  let pool: Pool;
  const sql = async <T>(text: string, params: unknown[] = []): Promise<T[]> => (await pool.query(text, params)).rows as T[];
  let env: { a: Record<string, string>; ba: Record<string, string>; b: Record<string, string> };
  let rx: Receiver;
  const opened: { close: () => Promise<unknown> }[] = [];

  // written under A
  let tenant: TenantWithKey;
  let mfaUser: { email: string; userId: string; device: TotpDevice; recoveryCodes: string[] };
  let otpUser: { email: string; userId: string };
  /** an access token signed before the rotation (of a user who does nothing else) */
  let accessUnderA: string;
  let webhook: { id: string; secret: string; previousSecret: string; path: string };
  let cursorUnderA: string;
  let emailCodeUnderA: string;
  let workerBA: INestApplicationContext;
  // written under B (with A previous)
  let mfaUserB: { email: string; userId: string; device: TotpDevice; recoveryCodes: string[] };

  const apiFor = (t: TestApp) => mfaApi(t, { id: tenant.tenantId, slug: tenant.slug, apiKey: tenant.apiKey, apiKeyId: '' });
  const boot = async (e: Record<string, string>): Promise<TestApp> => {
    const t = await createTestApp(e);
    opened.push(t);
    return t;
  };
  const worker = async (e: Record<string, string>): Promise<INestApplicationContext> => {
    const w = await startWorkerWith({ ...e, OUTBOX_POLL_MS: '50', WEBHOOK_BACKOFF_BASE_MS: '20' });
    opened.push(w);
    return w;
  };
  const close = async (x: { close: () => Promise<unknown> }) => {
    opened.splice(opened.indexOf(x), 1);
    await x.close();
  };
  const cli = async (e: Record<string, string>): Promise<{ code: number; out: string[]; err: string[] }> => {
    const out: string[] = [];
    const err: string[] = [];
    const io: CliIo = { out: (l) => out.push(l), err: (l) => err.push(l) };
    const code = await withEnv(e, () => runCli(['kek:rewrap'], io));
    return { code, out, err };
  };
  const line = (out: string[], prefix: string) => out.find((l) => l.startsWith(prefix)) ?? `(no line ${prefix})`;
  const envelopes = async () => ({
    signing: await sql<{ kid: string; private_enc: string }>(`SELECT kid, private_enc FROM signing_keys`),
    totp: await sql<{ user_id: string; secret_enc: string }>(`SELECT user_id, secret_enc FROM user_mfa_factors ORDER BY user_id`),
    dob: await sql<{ date_of_birth_enc: string }>(`SELECT date_of_birth_enc FROM users WHERE id = $1`, [mfaUser.userId]),
    hook: await sql<{ secret_enc: string; previous_secret_enc: string }>(`SELECT secret_enc, previous_secret_enc FROM webhook_endpoints WHERE id = $1`, [webhook.id]),
    twilio: await sql<{ byok_twilio_auth_token_enc: string }>(`SELECT byok_twilio_auth_token_enc FROM tenants WHERE id = $1`, [tenant.tenantId]),
  });

  /** Emits agent.revoked through the outbox and waits for its signed delivery on the receiver. */
  const deliverEvent = async (t: TestApp) => {
    const agentId = await insertAgentClient(t.db, tenant.tenantId);
    await t.db.tx((tx) =>
      t.app.get(EventsService).outbox(tx, { tenantId: tenant.tenantId, topic: 'webhook', eventType: 'agent.revoked', payload: { agent_client_id: agentId, agent_name: 'bot', revoked_at: new Date().toISOString() } }),
    );
    const [r] = await rx.waitFor((x) => x.path === webhook.path && x.body.includes(agentId), 1, 30_000);
    return r;
  };

  beforeAll(async () => {
    db = await createIsolatedDatabase();
    pool = new Pool({ connectionString: db.url, max: 2 });
    env = {
      a: { DATABASE_URL: db.url, KEY_ENCRYPTION_KEY: A, KEY_ENCRYPTION_KEY_PREVIOUS: '' },
      ba: { DATABASE_URL: db.url, KEY_ENCRYPTION_KEY: B, KEY_ENCRYPTION_KEY_PREVIOUS: A },
      b: { DATABASE_URL: db.url, KEY_ENCRYPTION_KEY: B, KEY_ENCRYPTION_KEY_PREVIOUS: '' },
    };
    rx = await new Receiver().start();

    // --- everything written under A, through the HTTP API
    const t = await boot(env.a);
    tenant = await tenantWithKey(t, { email_otp_enabled: true, byok_twilio_account_sid: SID, byok_twilio_auth_token: TWILIO_TOKEN, byok_twilio_messaging_service_sid: MSID });
    const api = apiFor(t);
    const email = uniqueEmail('kek');
    const reg = await t.http().post('/v1/auth/register').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', randomIp()).send({ email, password: STRONG_PASSWORD, consent: true, date_of_birth: DOB }).expect(201);
    const setup = await api.setup(reg.body.access_token).expect(200);
    const device = new TotpDevice(setup.body.secret);
    const done = await api.verifySetup(reg.body.access_token, { code: await device.next() }).expect(200);
    mfaUser = { email, userId: reg.body.user.id, device, recoveryCodes: done.body.recovery_codes };

    const otpEmail = uniqueEmail('kek-otp');
    const otpReg = await t.http().post('/v1/auth/register').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', randomIp()).send({ email: otpEmail, password: STRONG_PASSWORD, consent: true }).expect(201);
    otpUser = { email: otpEmail, userId: otpReg.body.user.id };
    accessUnderA = (
      await t.http().post('/v1/auth/register').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', randomIp()).send({ email: uniqueEmail('kek-token'), password: STRONG_PASSWORD, consent: true }).expect(201)
    ).body.access_token;
    // an email code issued just before the rotation (read from the outbox as the mail worker would)
    await t.http().post('/v1/auth/email-otp').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', randomIp()).send({ email: otpEmail }).expect(202);
    const [m] = await t.db.query<{ secret_enc: string }>(`SELECT secret_enc FROM outbox WHERE topic = 'email' AND payload->>'to' = $1 AND event_type = 'email.email_otp' ORDER BY id DESC LIMIT 1`, [otpEmail]);
    emailCodeUnderA = JSON.parse(cipherOf(A).decryptString(m.secret_enc)).code;

    // a webhook endpoint whose secret was rotated (both secret columns under A)
    const hooks = `/v1/auth/dashboard/tenants/${tenant.slug}/webhooks`;
    const path = rx.path();
    const created = await t.http().post(hooks).set('Cookie', tenant.cookie).set('X-CSRF-Token', tenant.csrf).send({ url: rx.url(path), events: ['agent.revoked'] }).expect(201);
    const rotated = await t.http().post(`${hooks}/${created.body.id}/rotate-secret`).set('Cookie', tenant.cookie).set('X-CSRF-Token', tenant.csrf).send({}).expect(200);
    webhook = { id: created.body.id, secret: rotated.body.secret, previousSecret: created.body.secret, path };

    // a list cursor signed under A
    const page = await t.http().get(`/v1/auth/dashboard/tenants/${tenant.slug}/users?limit=1`).set('Cookie', tenant.cookie).expect(200);
    cursorUnderA = page.body.pagination.next_cursor;
    expect(cursorUnderA).toEqual(expect.any(String));

    // everything is under A: A opens it, B does not
    const e = await envelopes();
    expect(cipherOf(A).decryptString(e.dob[0].date_of_birth_enc, `dob:${tenant.tenantId}`)).toBe(DOB);
    expect(() => cipherOf(B).decrypt(e.signing[0].private_enc, `signing-key:${e.signing[0].kid}`)).toThrow();
    await close(t);
  }, 120_000);

  afterAll(async () => {
    for (const x of opened.reverse()) await x.close().catch(() => undefined);
    await rx?.close();
    await pool?.end();
    await db?.drop();
    await sleep(2_100); // ioredis' socket-close timers
  }, 60_000);

  it('kek:rewrap knows every encrypted column of the schema (each *_enc column)', async () => {
    const columns = await sql<{ c: string }>(`SELECT table_name || '.' || column_name AS c FROM information_schema.columns WHERE table_schema = 'public' AND column_name LIKE '%\\_enc' ORDER BY 1`);
    expect(columns.map((r) => r.c)).toEqual(ENVELOPE_COLUMNS.map((c) => `${c.table}.${c.column}`).sort());
  });

  it('B alone before the re-wrap: the API refuses to start, saying the signing key cannot be decrypted; nothing is changed', async () => {
    const before = await envelopes();
    const err = await createTestApp(env.b).then(
      async (started) => {
        await started.close();
        return new Error('the instance started');
      },
      (e: Error) => e,
    );
    expect(err.message).toMatch(/signing key .* cannot be decrypted .*KEY_ENCRYPTION_KEY is not the key it was encrypted with, nor is any key of KEY_ENCRYPTION_KEY_PREVIOUS/);
    expect(err.message).not.toContain(A);
    expect(err.message).not.toContain(B);
    // (kek:rewrap with B alone fails at its start the same way: it boots the same kernel)
    expect(await envelopes()).toEqual(before);
  });

  it('B with A in KEY_ENCRYPTION_KEY_PREVIOUS: TOTP, recovery codes, email codes, cursors, tokens and webhook signatures of A all work; new values are written under B', async () => {
    const t = await boot(env.ba);
    workerBA = await worker(env.ba);
    const api = apiFor(t);

    // an access token signed before the rotation still verifies; a new sign-in is signed (the key opened with A)
    await t.http().get('/v1/auth/me').set('Authorization', `Bearer ${accessUnderA}`).expect(200);
    const challenge = await api.challenge(mfaUser.email);
    const signed = await api.verify({ mfa_challenge_token: challenge, code: await mfaUser.device.next() }).expect(200);
    await t.http().get('/v1/auth/me').set('Authorization', `Bearer ${signed.body.access_token}`).expect(200);
    // a recovery code hashed under A
    await api.verify({ mfa_challenge_token: await api.challenge(mfaUser.email), code: mfaUser.recoveryCodes[0] }).expect(200);
    // the email code issued under A, within its 10 minutes
    await t.http().post('/v1/auth/email-otp/verify').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', randomIp()).send({ email: otpUser.email, code: emailCodeUnderA }).expect(200);
    // the cursor signed under A
    const next = await t.http().get(`/v1/auth/dashboard/tenants/${tenant.slug}/users?limit=1&cursor=${encodeURIComponent(cursorUnderA)}`).set('Cookie', tenant.cookie).expect(200);
    expect(next.body.data).toHaveLength(1);
    // webhook secrets under A sign the delivery (both the current and the rotated-out one)
    const r = await deliverEvent(t);
    expect(verifyStandardWebhook(webhook.secret, r.headers, r.body)).toBe(true);
    expect(verifyStandardWebhook(webhook.previousSecret, r.headers, r.body)).toBe(true);

    // a user enrolling now gets a seed under B and recovery codes recorded under B's fingerprint
    const email = uniqueEmail('kek-b');
    const reg = await t.http().post('/v1/auth/register').set('X-API-Key', tenant.apiKey).set('X-Forwarded-For', randomIp()).send({ email, password: STRONG_PASSWORD, consent: true }).expect(201);
    const setup = await api.setup(reg.body.access_token).expect(200);
    const device = new TotpDevice(setup.body.secret);
    const done = await api.verifySetup(reg.body.access_token, { code: await device.next() }).expect(200);
    mfaUserB = { email, userId: reg.body.user.id, device, recoveryCodes: done.body.recovery_codes };
    const [f] = await t.db.query<{ secret_enc: string }>(`SELECT secret_enc FROM user_mfa_factors WHERE user_id = $1`, [mfaUserB.userId]);
    expect(cipherOf(B).decryptString(f.secret_enc, `mfa-totp:${mfaUserB.userId}`)).toBe(setup.body.secret);
    const keyIds = await t.db.query<{ user_id: string; key_id: string }>(`SELECT DISTINCT user_id, key_id FROM mfa_recovery_codes ORDER BY key_id`);
    expect(keyIds).toEqual(
      expect.arrayContaining([
        { user_id: mfaUser.userId, key_id: kekFingerprint(Buffer.from(A, 'base64')) },
        { user_id: mfaUserB.userId, key_id: kekFingerprint(Buffer.from(B, 'base64')) },
      ]),
    );
    expect(keyIds).toHaveLength(2);
  });

  it('kek:rewrap moves every envelope under B (counts per table, idempotent), reports the recovery codes left under A, and says PREVIOUS cannot go yet', async () => {
    // short-lived copies still under A: a relayed outbox row's secret, a replayable answer's
    // secret, and a queued mail job's copy in Redis (delayed, and no worker runs meanwhile)
    await close(workerBA);
    const a = cipherOf(A);
    const secrets = { outbox: JSON.stringify({ token: 'kek-outbox-token' }), idem: JSON.stringify({ api_key: 'kek-idempotent-secret' }), job: JSON.stringify({ code: '123456' }) };
    const [ob] = await sql<{ id: string }>(
      `INSERT INTO outbox (tenant_id, topic, event_type, payload, secret_enc, dispatched_at, processed_at) VALUES ($1, 'kek-test', 'kek.test', '{}', $2, now(), now()) RETURNING id::text AS id`,
      [tenant.tenantId, a.encrypt(secrets.outbox)],
    );
    const idemKey = `kek-${randomBytes(4).toString('hex')}`;
    await sql(
      `INSERT INTO idempotency_keys (scope, key, request_hash, status_code, response, secret_enc, expires_at) VALUES ('kek-test', $1, 'h', 201, '{}', $2, now() + interval '1 hour')`,
      [idemKey, a.encrypt(secrets.idem)],
    );
    const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', { maxRetriesPerRequest: null });
    const mailQueue = new Queue('email', { connection: redis, prefix: `${process.env.REDIS_KEY_PREFIX}bull` });
    const job = await mailQueue.add('email.kek_test', { outboxId: ob.id, tenantId: tenant.tenantId, eventType: 'email.kek_test', payload: {}, secretEnc: a.encrypt(secrets.job), createdAt: new Date().toISOString() }, { delay: 3_600_000 });

    const run = await cli(env.ba);
    expect(run.err).toEqual([]);
    expect(run.code).toBe(0);
    const out = run.out;
    const [fa, fb] = [A, B].map((k) => kekFingerprint(Buffer.from(k, 'base64')));
    expect(out[0]).toBe(`key fingerprints: KEY_ENCRYPTION_KEY ${fb}; KEY_ENCRYPTION_KEY_PREVIOUS 1: ${fa}`);
    expect(line(out, 'signing_keys.private_enc:')).toBe('signing_keys.private_enc: 1 re-wrapped, 0 already current, 0 undecryptable');
    expect(line(out, 'user_mfa_factors.secret_enc:')).toBe('user_mfa_factors.secret_enc: 1 re-wrapped, 1 already current, 0 undecryptable');
    expect(line(out, 'users.date_of_birth_enc:')).toBe('users.date_of_birth_enc: 1 re-wrapped, 0 already current, 0 undecryptable');
    expect(line(out, 'webhook_endpoints.secret_enc:')).toBe('webhook_endpoints.secret_enc: 1 re-wrapped, 0 already current, 0 undecryptable');
    expect(line(out, 'webhook_endpoints.previous_secret_enc:')).toBe('webhook_endpoints.previous_secret_enc: 1 re-wrapped, 0 already current, 0 undecryptable');
    expect(line(out, 'tenants.byok_twilio_auth_token_enc:')).toBe('tenants.byok_twilio_auth_token_enc: 1 re-wrapped, 0 already current, 0 undecryptable');
    // (rows the worker wrote under B, or under A and did not settle, may be counted beside the seeded ones)
    expect(line(out, 'outbox.secret_enc:')).toMatch(/^outbox\.secret_enc: [1-9]\d* re-wrapped, \d+ already current, 0 undecryptable$/);
    expect(line(out, 'idempotency_keys.secret_enc:')).toMatch(/^idempotency_keys\.secret_enc: [1-9]\d* re-wrapped, \d+ already current, 0 undecryptable$/);
    expect(line(out, 'queued jobs (email, webhook):')).toMatch(/^queued jobs \(email, webhook\): [1-9]\d* re-wrapped, \d+ already current, 0 undecryptable$/);
    expect(line(out, 'recovery codes:')).toMatch(/^recovery codes: 1 user\(s\) hold unused codes under the current key, 1 under another \(1 under previous key 1\); /);
    expect(out[out.length - 1]).toMatch(/^KEY_ENCRYPTION_KEY_PREVIOUS can be removed: not yet: 1 user\(s\) hold recovery codes possibly under an earlier key/);
    // never a key or a value
    const all = run.out.join('\n');
    for (const secret of [A, B, Buffer.from(A, 'base64').toString('hex'), TWILIO_TOKEN, DOB, webhook.secret, webhook.secret.slice(6)]) expect(all).not.toContain(secret);

    // B alone opens every envelope now, with its AAD
    const e = await envelopes();
    const b = cipherOf(B);
    for (const s of e.signing) expect(b.decryptString(s.private_enc, `signing-key:${s.kid}`)).toContain('PRIVATE KEY');
    for (const f of e.totp) expect(b.decryptString(f.secret_enc, `mfa-totp:${f.user_id}`)).toMatch(/^[A-Z2-7]+$/);
    expect(b.decryptString(e.dob[0].date_of_birth_enc, `dob:${tenant.tenantId}`)).toBe(DOB);
    expect(b.decryptString(e.hook[0].secret_enc, `webhook_endpoint:${webhook.id}`)).toBe(webhook.secret);
    expect(b.decryptString(e.hook[0].previous_secret_enc, `webhook_endpoint:${webhook.id}`)).toBe(webhook.previousSecret);
    expect(b.decryptString(e.twilio[0].byok_twilio_auth_token_enc, `byok_twilio_auth_token:${tenant.tenantId}`)).toBe(TWILIO_TOKEN);
    const left = await sql<{ v: string }>(
      `SELECT secret_enc AS v FROM outbox WHERE secret_enc IS NOT NULL UNION ALL SELECT secret_enc FROM idempotency_keys WHERE secret_enc IS NOT NULL`,
    );
    for (const r of left) expect(b.rewrap(r.v)).toBeNull();
    const [seeded] = await sql<{ o: string; i: string }>(
      `SELECT (SELECT secret_enc FROM outbox WHERE id = $1::bigint) AS o, (SELECT secret_enc FROM idempotency_keys WHERE scope = 'kek-test' AND key = $2) AS i`,
      [ob.id, idemKey],
    );
    expect(b.decryptString(seeded.o)).toBe(secrets.outbox);
    expect(b.decryptString(seeded.i)).toBe(secrets.idem);
    // the job's copy in Redis too, the rest of its data untouched
    const rewrappedJob = (await mailQueue.getJob(job.id!))!;
    expect(await rewrappedJob.getState()).toBe('delayed');
    expect(b.decryptString(rewrappedJob.data.secretEnc)).toBe(secrets.job);
    expect({ ...rewrappedJob.data, secretEnc: '' }).toEqual({ ...job.data, secretEnc: '' });
    await rewrappedJob.remove();
    await mailQueue.close();
    await redis.quit();

    // a second run finds everything current
    const again = await cli(env.ba);
    expect(again.code).toBe(0);
    for (const l of again.out.filter((x) => /^[a-z_]+\.[a-z_]+: /.test(x))) expect(l).toMatch(/: 0 re-wrapped, \d+ already current, 0 undecryptable$/);
    expect(line(again.out, 'signing_keys.private_enc:')).toBe('signing_keys.private_enc: 0 re-wrapped, 1 already current, 0 undecryptable');
  });

  it('after the re-wrap, B alone: TOTP, tokens, webhooks and recovery codes made under B work; a recovery code of A fails, as reported', async () => {
    for (const x of [...opened]) await close(x);
    const t = await boot(env.b);
    await worker(env.b);
    const api = apiFor(t);

    const challenge = await api.challenge(mfaUser.email);
    const signed = await api.verify({ mfa_challenge_token: challenge, code: await mfaUser.device.next() }).expect(200);
    await t.http().get('/v1/auth/me').set('Authorization', `Bearer ${signed.body.access_token}`).expect(200);
    await t.http().get('/v1/auth/me').set('Authorization', `Bearer ${accessUnderA}`).expect(200);

    const r = await deliverEvent(t);
    expect(verifyStandardWebhook(webhook.secret, r.headers, r.body)).toBe(true);
    expect(verifyStandardWebhook(webhook.previousSecret, r.headers, r.body)).toBe(true);

    // the recovery codes hashed under A no longer verify (A is gone); those made under B do
    await api.verify({ mfa_challenge_token: await api.challenge(mfaUser.email), code: mfaUser.recoveryCodes[1] }).expect(401);
    await api.verify({ mfa_challenge_token: await api.challenge(mfaUserB.email), code: mfaUserB.recoveryCodes[0] }).expect(200);
    // and a cursor signed under A is refused once A is gone
    await t.http().get(`/v1/auth/dashboard/tenants/${tenant.slug}/users?limit=1&cursor=${encodeURIComponent(cursorUnderA)}`).set('Cookie', tenant.cookie).expect(400);

    // the CLI with B alone: nothing left to re-wrap, the A codes named as under a key not configured
    const run = await cli(env.b);
    expect(run.code).toBe(0);
    expect(line(run.out, 'recovery codes:')).toMatch(/^recovery codes: 1 user\(s\) hold unused codes under the current key, 1 under another \(1 under a key not configured \(they no longer verify\)\); /);
    expect(run.out[run.out.length - 1]).toBe('KEY_ENCRYPTION_KEY_PREVIOUS is not set: nothing to remove');
  });

  it('an envelope no configured key opens is reported by table and row, never printed, and fails the run (exit 1)', async () => {
    const stranger = cipherOf(randomBytes(32).toString('base64')).encrypt(DOB, `dob:${tenant.tenantId}`);
    await sql(`UPDATE users SET date_of_birth_enc = $2 WHERE id = $1`, [otpUser.userId, stranger]);
    const run = await cli(env.b);
    expect(run.code).toBe(1);
    expect(line(run.out, 'users.date_of_birth_enc:')).toBe(`users.date_of_birth_enc: 0 re-wrapped, 1 already current, 1 undecryptable (rows ${otpUser.userId})`);
    expect(run.err.join('\n')).toMatch(/1 value\(s\) could not be opened with any configured key/);
    expect([...run.out, ...run.err].join('\n')).not.toContain(stranger);
    // the run went on with the other tables, and changed nothing of that row
    expect(line(run.out, 'signing_keys.private_enc:')).toBe('signing_keys.private_enc: 0 re-wrapped, 1 already current, 0 undecryptable');
    const [row] = await sql<{ date_of_birth_enc: string }>(`SELECT date_of_birth_enc FROM users WHERE id = $1`, [otpUser.userId]);
    expect(row.date_of_birth_enc).toBe(stranger);
  });
});
