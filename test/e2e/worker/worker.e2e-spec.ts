import { randomBytes } from 'crypto';
import { AddressInfo, createServer, Socket } from 'net';
import { INestApplicationContext } from '@nestjs/common';
import { Queue } from 'bullmq';
import Redis from 'ioredis';
import { CliIo, runCli } from '../../../src/cli';
import { resetConfigForTests } from '../../../src/config/config.module';
import { createDataSource } from '../../../src/shared/db/data-source';
import { Db } from '../../../src/shared/db/db.service';
import { EnvelopeCipher } from '../../../src/shared/crypto/envelope-cipher';
import { EventsService } from '../../../src/shared/events/events.service';
import { MailRequest, MailService } from '../../../src/shared/mail/mail.service';
import { bullConnection, bullPrefix } from '../../../src/shared/outbox/bull-options';
import { outboxJobId } from '../../../src/shared/outbox/outbox-job';
import { OutboxRelay } from '../../../src/shared/outbox/outbox-relay.service';
import { startWorker } from '../../../src/worker';
import { createTenant, TenantFixture } from '../../factories/tenant.factory';
import { uniqueEmail } from '../../setup/app';
import { createIsolatedDatabase, IsolatedDatabase } from '../../setup/isolated-db';
import { SmtpCapture, startSmtpCapture } from '../../setup/smtp-capture';
import { eventually } from '../webhooks/webhook-helpers';

const ACCOUNTS_URL = 'https://accounts.example.test';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Every value stored under this run's Redis prefix, as one string (to look for plaintext secrets). */
async function dumpRedis(redis: Redis, prefix: string): Promise<string> {
  const out: string[] = [];
  for await (const keys of redis.scanStream({ match: `${prefix}*`, count: 500 })) {
    for (const key of keys as string[]) {
      const type = await redis.type(key);
      if (type === 'hash') out.push(JSON.stringify(await redis.hgetall(key)));
      else if (type === 'string') out.push(String(await redis.get(key)));
      else if (type === 'list') out.push(...(await redis.lrange(key, 0, -1)));
      else if (type === 'zset') out.push(...(await redis.zrange(key, 0, -1)));
      else if (type === 'set') out.push(...(await redis.smembers(key)));
      else if (type === 'stream') out.push(JSON.stringify(await redis.xrange(key, '-', '+')));
    }
  }
  return out.join('\n');
}

function captureIo(): CliIo & { stdout: string[]; stderr: string[] } {
  const stdout: string[] = [];
  const stderr: string[] = [];
  return { stdout, stderr, out: (l) => stdout.push(l), err: (l) => stderr.push(l) };
}

// The worker runs on a database of its own (see isolated-db.ts): its relays take every pending
// outbox row, and the counts below must not include rows of test files running beside this one.
describe('worker: outbox relay, mail delivery, operator CLI', () => {
  let isolated: IsolatedDatabase;
  const env: Record<string, string> = { OUTBOX_POLL_MS: '50', ACCOUNTS_URL };
  const saved: Record<string, string | undefined> = {};
  let smtp: SmtpCapture;
  let worker: INestApplicationContext;
  let second: INestApplicationContext | undefined;
  let db: Db;
  let mail: MailService;
  let redis: Redis;
  let tenant: TenantFixture;
  const prefix = process.env.REDIS_KEY_PREFIX as string;

  const send = (m: Partial<MailRequest> & Pick<MailRequest, 'to'>) =>
    db.tx((tx) => mail.enqueue(tx, { tenantId: tenant.id, template: 'email_verification', data: {}, ...m }));
  const outboxRow = async (to: string) =>
    (await db.query<{ id: string; payload: string; secret_enc: string | null; dispatched_at: Date | null; processed_at: Date | null }>(
      `SELECT id, payload::text AS payload, secret_enc, dispatched_at, processed_at FROM outbox WHERE payload->>'to' = $1`,
      [to],
    ))[0];
  const jobKey = async (topic: string, outboxId: string) => {
    const [row] = await db.query<{ created_at: Date }>(`SELECT created_at FROM outbox WHERE id = $1`, [outboxId]);
    return `${bullPrefix({ REDIS_KEY_PREFIX: prefix })}:${topic}:${outboxJobId(outboxId, row.created_at)}`;
  };
  /**
   * The job's hash once the job has finished (completed or failed for good). Some callers have
   * not seen the job relayed yet: the wait covers the relay, a pickup and the job itself.
   */
  const waitForJob = async (topic: string, outboxId: string) => {
    const key = await jobKey(topic, outboxId);
    return eventually(async () => {
      const job = await redis.hgetall(key);
      return job.finishedOn ? job : undefined;
    }, 20_000, `job ${key} of ${topic} to finish`);
  };

  beforeAll(async () => {
    isolated = await createIsolatedDatabase();
    smtp = await startSmtpCapture();
    env.SMTP_URL = smtp.url;
    env.DATABASE_URL = isolated.url;
    for (const [k, v] of Object.entries(env)) {
      saved[k] = process.env[k];
      process.env[k] = v;
    }
    resetConfigForTests();
    worker = await startWorker({ logger: false });
    db = worker.get(Db);
    mail = worker.get(MailService);
    redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
    tenant = await createTenant(db);
  }, 60_000);

  afterAll(async () => {
    await second?.close();
    await worker?.close();
    await redis?.quit();
    await smtp?.close();
    await isolated?.drop();
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
    resetConfigForTests();
  });

  it('relays a committed mail and sends it with its link; the token is never stored in plaintext', async () => {
    const to = uniqueEmail('invitee');
    const token = randomBytes(32).toString('base64url');
    await send({ to, template: 'dashboard_invite', data: { role: 'member', inviter_email: 'boss@example.com' }, secret: { token } });

    const msg = await smtp.waitFor((m) => m.to.includes(to));
    const link = `${ACCOUNTS_URL}/dashboard/invites/accept?token=${token}`;
    expect(msg.subject).toBe(`You are invited to join Tenant ${tenant.slug}`);
    expect(msg.text).toContain(link);
    expect(msg.text).toContain('boss@example.com invited you');
    expect(msg.html).toContain(`href="${link}"`);
    expect(msg.headers['auto-submitted']).toBe('auto-generated');

    const job = await waitForJob('email', (await outboxRow(to)).id);
    const row = await outboxRow(to);
    expect(row.dispatched_at).toBeInstanceOf(Date);
    expect(row.payload).not.toContain(token);
    // the job names the row only (the mail worker reads the link from it); once the mail left, the row forgets it
    const data = JSON.parse(job.data);
    expect(data).toEqual({ outboxId: row.id, tenantId: tenant.id, eventType: 'email.dashboard_invite', createdAt: expect.any(String) });
    expect(row.processed_at).toBeInstanceOf(Date);
    expect(row.secret_enc).toBeNull();
    // an opaque Message-ID: neither the outbox sequence nor the row's time shows through it
    const messageId = JSON.parse(job.returnvalue).messageId as string;
    expect(messageId).toMatch(/^<[0-9a-f]{32}@[A-Za-z0-9.-]+>$/);
    expect(msg.headers['message-id']).toBe(messageId);
    expect(await dumpRedis(redis, prefix)).not.toContain(token);
  }, 60_000);

  it('a mail job in Redis names its outbox row only: no job holds the address, the template data or the secret, whether sent, retried after a refusal quoting the address, or refused for good (5yz: kept 14 days)', async () => {
    const tag = randomBytes(5).toString('hex');
    const [sent, retried, refused] = ['sent', 'retried', 'refused'].map((k) => `${k}-${tag}@example.com`);
    // an internationalised domain: the server receives (and quotes) its A-label, not the stored form
    const idn = `retried-idn-${tag}@bücher-${tag}.example`;
    const inviter = `boss-${tag}@example.com`;
    const token = randomBytes(32).toString('base64url');
    // each refusal quotes the recipient (smtp-capture), as real servers do
    smtp.failNext(1, (r) => r === retried);
    smtp.failNext(1, (r) => r.startsWith(`retried-idn-${tag}@`));
    smtp.failNext(1, (r) => r === refused, 550);
    await send({ to: sent, template: 'dashboard_invite', data: { role: 'member', inviter_email: inviter }, secret: { token } });
    await send({ to: retried, template: 'password_reset', secret: { token: `${token}-retried` } });
    await send({ to: idn, template: 'password_reset', secret: { token: `${token}-idn` } });
    await send({ to: refused, template: 'password_reset', secret: { token: `${token}-refused` } });

    // the mails are still right: read from their rows
    const invite = await smtp.waitFor((m) => m.to.includes(sent));
    expect(invite.text).toContain(`${ACCOUNTS_URL}/dashboard/invites/accept?token=${token}`);
    expect(invite.text).toContain(`${inviter} invited you`);
    const reset = await smtp.waitFor((m) => m.to.includes(retried), 15_000);
    expect(reset.text).toContain(`${ACCOUNTS_URL}/reset-password?token=${token}-retried`);

    await smtp.waitFor((m) => m.to.some((x) => x.startsWith(`retried-idn-${tag}@`)), 15_000);

    const jobs: Record<string, Record<string, string>> = {};
    for (const to of [sent, retried, idn, refused]) {
      const row = await outboxRow(to);
      jobs[to] = await waitForJob('email', row.id);
      expect(Object.keys(JSON.parse(jobs[to].data)).sort()).toEqual(['createdAt', 'eventType', 'outboxId', 'tenantId']);
    }
    expect(Number(jobs[retried].atm)).toBe(2);
    expect(Number(jobs[idn].atm)).toBe(2);
    expect(jobs[refused].failedReason).toMatch(/refused by the SMTP server \(550\); not retried/);
    expect(smtp.messages.some((m) => m.to.includes(refused))).toBe(false);
    // every job hash, the queues' event streams included: no address, no template data, no secret
    const dump = await dumpRedis(redis, prefix);
    expect(dump).not.toContain(tag);
    expect(dump).not.toContain(token);
    smtp.clearFailures();
  }, 60_000);

  it('a mail job queued by an older relay (the row\'s payload and encrypted secret in its data) is still sent, as its outbox row says', async () => {
    const to = uniqueEmail('older-relay');
    const token = randomBytes(32).toString('base64url');
    const cipher = worker.get(EnvelopeCipher);
    const payload = { to, template: 'password_reset', data: {} };
    // relayed already (dispatched_at): the relay leaves it, the job below is its only one
    const [row] = await db.query<{ id: string; created_at: Date }>(
      `INSERT INTO outbox (tenant_id, topic, event_type, payload, secret_enc, dispatched_at) VALUES ($1, 'email', 'email.password_reset', $2, $3, now()) RETURNING id::text AS id, created_at`,
      [tenant.id, JSON.stringify(payload), cipher.encrypt(JSON.stringify({ token }))],
    );
    const queue = new Queue('email', { connection: bullConnection({ REDIS_URL: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' }), prefix: bullPrefix({ REDIS_KEY_PREFIX: prefix }) });
    try {
      await queue.add(
        'email.password_reset',
        // the job's copy is stale (another token): the row is what is sent
        { outboxId: row.id, tenantId: tenant.id, eventType: 'email.password_reset', payload, secretEnc: cipher.encrypt(JSON.stringify({ token: 'stale-copy' })), createdAt: row.created_at.toISOString() },
        { jobId: outboxJobId(row.id, row.created_at) },
      );
    } finally {
      await queue.close();
    }
    const msg = await smtp.waitFor((m) => m.to.includes(to), 15_000);
    expect(msg.text).toContain(`${ACCOUNTS_URL}/reset-password?token=${token}`);
    expect(msg.text).not.toContain('stale-copy');
    expect(JSON.parse((await waitForJob('email', row.id)).returnvalue).messageId).toBeDefined();
    const settled = await outboxRow(to);
    expect(settled.processed_at).toBeInstanceOf(Date);
    expect(settled.secret_enc).toBeNull();
  }, 60_000);

  it('sends a one-time code without a link and escapes interpolated values in the HTML part', async () => {
    const to = uniqueEmail('otp');
    await send({ to, template: 'email_otp', data: { tenant_name: '<b>Evil & "Co"</b>' }, secret: { code: '042917' } });
    const msg = await smtp.waitFor((m) => m.to.includes(to));
    expect(msg.subject).toBe('Your <b>Evil & "Co"</b> verification code');
    expect(msg.text).toContain('042917');
    expect(msg.text).not.toContain('token=');
    expect(msg.html).toContain('&lt;b&gt;Evil &amp; &quot;Co&quot;&lt;/b&gt;');
    expect(msg.html).not.toContain('<b>Evil');
  });

  it('sends a name that reads like an RFC 2047 encoded word as it is written, not as what it encodes', async () => {
    const to = uniqueEmail('encoded-word');
    // "=?utf-8?B?...?=" would otherwise be decoded by the mail client: here into a line break and a
    // bidirectional override, neither of which a tenant name may hold
    const name = `=?utf-8?B?${Buffer.from('Bank\r\n\u202Eevil').toString('base64')}?=`;
    await send({ to, template: 'email_otp', data: { tenant_name: name }, secret: { code: '042917' } });
    const msg = await smtp.waitFor((m) => m.to.includes(to));
    expect(msg.subject).toBe(`Your ${name} verification code`);
    expect(msg.headers.subject).not.toContain(name);
  });

  it('sends nothing for a transaction that rolls back', async () => {
    const to = uniqueEmail('rollback');
    await expect(
      db.tx(async (tx) => {
        await mail.enqueue(tx, { tenantId: tenant.id, to, template: 'password_changed', data: {} });
        throw new Error('rolled back');
      }),
    ).rejects.toThrow('rolled back');
    expect(await outboxRow(to)).toBeUndefined();
  });

  it('retries a mail the SMTP server refused and delivers it exactly once', async () => {
    const to = uniqueEmail('retry');
    const token = randomBytes(32).toString('base64url');
    smtp.failNext(2, (r) => r === to);
    const rejectedBefore = smtp.rejected;
    await send({ to, template: 'password_reset', secret: { token } });

    const msg = await smtp.waitFor((m) => m.to.includes(to), 15_000);
    expect(msg.text).toContain(`${ACCOUNTS_URL}/reset-password?token=${token}`);
    expect(smtp.rejected - rejectedBefore).toBe(2);
    await sleep(500);
    expect(smtp.messages.filter((m) => m.to.includes(to))).toHaveLength(1);
    const job = await waitForJob('email', (await outboxRow(to)).id);
    expect(Number(job.atm)).toBeGreaterThanOrEqual(3);
  }, 60_000);

  it('a mail whose outbox row went while its job waited for a retry (its recipient erased) is not sent', async () => {
    const to = uniqueEmail('erased');
    smtp.failNext(1, (r) => r === to);
    const rejectedBefore = smtp.rejected;
    await send({ to, template: 'password_reset', secret: { token: randomBytes(32).toString('base64url') } });
    await eventually(async () => smtp.rejected > rejectedBefore, 15_000, 'the first attempt refused for now');
    const row = await outboxRow(to);
    const key = await jobKey('email', row.id);
    // what an erasure does to the unsent mails to the address, while this one waits in BullMQ
    expect((await db.exec(`DELETE FROM outbox WHERE id = $1 AND processed_at IS NULL`, [row.id])).rowCount).toBe(1);
    const job = await eventually(async () => {
      const j = await redis.hgetall(key);
      return j.finishedOn ? j : undefined;
    }, 20_000, 'the retry');
    expect(JSON.parse(job.returnvalue)).toEqual({ withdrawn: true });
    expect(smtp.messages.filter((m) => m.to.includes(to))).toHaveLength(0);
  }, 60_000);

  it('a link or code mail that SMTP refused until its secret expired is never sent (its row settled); one sent late states the time left, not the whole lifetime', async () => {
    const expiring = uniqueEmail('expiring');
    const late = uniqueEmail('late');
    // refused twice: the third attempt comes at least 6 s after the first (backoff timers of 1 s,
    // then 5 s, plus up to 10% jitter), so a 5 s secret has always expired by then, while the
    // second attempt (about 1-2.5 s after the row was written) has 3.5 s of slack to find it alive
    smtp.failNext(2, (r) => r === expiring);
    smtp.failNext(2, (r) => r === late);
    const rejectedBefore = smtp.rejected;
    await send({ to: expiring, template: 'magic_link', data: { expires_in_minutes: 5 / 60 }, secret: { token: 'lasts-5-seconds' } });
    await send({ to: late, template: 'magic_link', data: { expires_in_minutes: 0.5 }, secret: { token: 'lasts-30-seconds' } });

    const msg = await smtp.waitFor((m) => m.to.includes(late), 15_000);
    // about 24 of its 30 seconds left: not "in 1 minute"
    expect(msg.text).toContain('It works once and expires within a minute.');
    const row = await outboxRow(expiring);
    const job = await waitForJob('email', row.id);
    expect(JSON.parse(job.returnvalue)).toEqual({ expired: true });
    expect(smtp.rejected - rejectedBefore).toBe(4);
    await sleep(300);
    expect(smtp.messages.some((m) => m.to.includes(expiring))).toBe(false);
    const settled = await outboxRow(expiring);
    expect(settled.processed_at).toBeInstanceOf(Date);
    expect(settled.secret_enc).toBeNull();
  }, 60_000);

  it('gives up at once on a mail the SMTP server refuses for good (550: RFC 5321 says not to repeat it), settling its outbox row', async () => {
    const to = uniqueEmail('gone');
    smtp.failNext(5, (r) => r === to, 550);
    const rejectedBefore = smtp.rejected;
    await send({ to, template: 'password_reset', secret: { token: 'never-sent' } });
    const row = await outboxRow(to);
    const failed = await waitForJob('email', row.id);
    expect(failed.failedReason).toMatch(/refused by the SMTP server \(550\); not retried/);
    expect(failed.atm).toBe('1');
    expect(smtp.rejected - rejectedBefore).toBe(1);
    expect(smtp.messages.some((m) => m.to.includes(to))).toBe(false);
    // settled by the failed-job handler, right after the job ended
    const settled = await eventually(
      async () => (await db.query<{ processed_at: Date | null }>(`SELECT processed_at FROM outbox WHERE id = $1`, [row.id]))[0].processed_at,
      20_000,
      'the failed-job handler to settle the outbox row',
    );
    expect(settled).toBeInstanceOf(Date);
    smtp.clearFailures();
  }, 60_000);

  it('gives up at once on a mail that cannot be rendered, and queues topics nobody consumes yet', async () => {
    const events = worker.get(EventsService);
    const to = uniqueEmail('bad');
    await db.tx(async (tx) => {
      await events.outbox(tx, { tenantId: tenant.id, topic: 'email', eventType: 'email.nope', payload: { to, template: 'nope', data: {} } });
      await events.outbox(tx, { tenantId: tenant.id, topic: 'not-consumed', eventType: 'thing.happened', payload: { to } });
    });
    const [bad, other] = (
      await db.query<{ id: string }>(`SELECT id FROM outbox WHERE payload->>'to' = $1 ORDER BY topic = 'email' DESC`, [to])
    ).map((r) => r.id);
    const failed = await waitForJob('email', bad);
    expect(failed.failedReason).toMatch(/template/);
    expect(failed.atm).toBe('1');
    expect(await redis.hget(await jobKey('not-consumed', other), 'name')).toBe('thing.happened');
  }, 60_000);

  it('never sends to an ambiguous stored address (a quoted local part with an @): given up at once, nothing reaches SMTP', async () => {
    const events = worker.get(EventsService);
    const local = uniqueEmail('quoted').split('@')[0];
    const to = `"${local}@evil.example"@example.com`;
    await db.tx((tx) => events.outbox(tx, { tenantId: tenant.id, topic: 'email', eventType: 'email.password_reset', payload: { to, template: 'password_reset', data: {} } }));
    const [row] = await db.query<{ id: string }>(`SELECT id FROM outbox WHERE payload->>'to' = $1`, [to]);
    const failed = await waitForJob('email', row.id);
    expect(failed.failedReason).toMatch(/ambiguous/);
    expect(failed.atm).toBe('1');
    expect(smtp.messages.some((m) => m.to.some((r) => r.includes(local)))).toBe(false);
  }, 60_000);

  it('after PostgreSQL went back in time (a restore, a lagging replica) a row that gets an id again is still sent, though Redis holds the old job of that id', async () => {
    const first = uniqueEmail('before-restore');
    await send({ to: first, template: 'password_reset', secret: { token: 'before-restore-token' } });
    await smtp.waitFor((m) => m.to.includes(first));
    const old = await outboxRow(first);
    await waitForJob('email', old.id); // finished: BullMQ keeps it (a day)
    // the database as it was before that row: the row is gone and the sequence hands its id out again
    await db.query(`DELETE FROM outbox WHERE id = $1`, [old.id]);
    await db.query(`SELECT setval(pg_get_serial_sequence('outbox', 'id'), $1::bigint, false)`, [old.id]);
    const again = uniqueEmail('after-restore');
    await send({ to: again, template: 'password_reset', secret: { token: 'after-restore-token' } });
    expect((await outboxRow(again)).id).toBe(old.id);
    await smtp.waitFor((m) => m.to.includes(again), 10_000);
  }, 60_000);

  it('two relays side by side never dispatch a row twice', async () => {
    second = await startWorker({ logger: false });
    const relays = [worker.get(OutboxRelay), second.get(OutboxRelay)];

    // explicit race: both relays drain 250 rows (three batches) at once
    await Promise.all(relays.map((r) => r.stop()));
    const topic = `race-${randomBytes(3).toString('hex')}`;
    await db.query(
      `INSERT INTO outbox (tenant_id, topic, event_type, payload) SELECT $1, $2, 'race.row', jsonb_build_object('i', i) FROM generate_series(1, 250) i`,
      [tenant.id, topic],
    );
    const drain = async (r: OutboxRelay) => {
      let total = 0;
      for (let n = await r.relayOnce(); n > 0; n = await r.relayOnce()) total += n;
      return total;
    };
    const counts = await Promise.all([drain(relays[0]), drain(relays[1]), drain(relays[0]), drain(relays[1])]);
    expect(counts.reduce((a, b) => a + b, 0)).toBe(250);
    const [{ pending }] = await db.query<{ pending: number }>(`SELECT count(*)::int AS pending FROM outbox WHERE topic = $1 AND dispatched_at IS NULL`, [topic]);
    expect(pending).toBe(0);
    const queue = new Queue(topic, { connection: bullConnection({ REDIS_URL: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' }), prefix: bullPrefix({ REDIS_KEY_PREFIX: prefix }) });
    try {
      expect(await queue.count()).toBe(250);
    } finally {
      await queue.close();
    }

    // both workers polling and consuming: 20 mails, 20 deliveries
    for (const r of relays) r.start();
    const before = relays.map((r) => r.dispatched);
    const tag = randomBytes(4).toString('hex');
    const recipients = Array.from({ length: 20 }, (_, i) => `bulk-${i}-${tag}@example.com`);
    for (const to of recipients) await send({ to, template: 'magic_link', secret: { token: randomBytes(16).toString('base64url') } });
    await smtp.waitForCount((m) => m.to[0]?.endsWith(`-${tag}@example.com`), 20, 15_000);
    await sleep(500);
    const delivered = smtp.messages.filter((m) => m.to[0]?.endsWith(`-${tag}@example.com`)).map((m) => m.to[0]);
    expect(delivered.sort()).toEqual([...recipients].sort());
    expect(relays.reduce((sum, r, i) => sum + r.dispatched - before[i], 0)).toBe(20);
  });

  describe('CLI', () => {
    it('keys:rotate prints the new kid, which signs once cached JWKS have expired (--now: at once; --revoke-old: older keys withdrawn)', async () => {
      const io = captureIo();
      expect(await runCli(['keys:rotate'], io)).toBe(0);
      const kid = /new signing key: (\S+) \(published now, in every instance's JWKS as soon as it is told, 30 s at the latest; signs from (\S+)\)/.exec(io.stdout.join('\n'));
      expect(kid).not.toBeNull();
      const [row] = await db.query<{ kid: string; lead: number }>(`SELECT kid, extract(epoch FROM active_from - now())::float AS lead FROM signing_keys WHERE retired_at IS NULL`);
      expect(row.kid).toBe(kid![1]);
      expect(row.lead).toBeGreaterThan(300);
      // the key it replaces signs until then
      expect(await db.query(`SELECT 1 FROM signing_keys WHERE retired_at > now() + interval '300 seconds'`)).toHaveLength(1);
      const now = captureIo();
      expect(await runCli(['keys:rotate', '--now'], now)).toBe(0);
      const [active] = await db.query<{ kid: string; signing: boolean }>(`SELECT kid, active_from <= now() AS signing FROM signing_keys WHERE retired_at IS NULL`);
      expect(now.stdout.join('\n')).toContain(active.kid);
      expect(active.signing).toBe(true);
      const revoke = captureIo();
      expect(await runCli(['keys:rotate', '--revoke-old'], revoke)).toBe(0);
      const out = revoke.stdout.join('\n');
      const newKid = /new signing key: (\S+)/.exec(out)![1];
      expect(out).toContain(active.kid);
      expect(out).toMatch(/withdrawn \(tokens refused by every instance as soon as it is told, 30 s at the latest\)/);
      // only the new key is still within the published window
      const live = await db.query<{ kid: string }>(`SELECT kid FROM signing_keys WHERE retired_at IS NULL OR retired_at > now() - interval '24 hours'`);
      expect(live.map((r) => r.kid)).toEqual([newKid]);
      const bad = captureIo();
      expect(await runCli(['keys:rotate', '--later'], bad)).toBe(1);
    });

    it('tenants:set-tier updates the tier with an audit row', async () => {
      const t = await createTenant(db);
      const io = captureIo();
      expect(await runCli(['tenants:set-tier', t.slug, 'enterprise'], io)).toBe(0);
      expect(io.stdout.join('\n')).toContain(`tier free -> enterprise`);
      const [row] = await db.query<{ tier: string }>(`SELECT tier FROM tenants WHERE id = $1`, [t.id]);
      expect(row.tier).toBe('enterprise');
      const audit = await db.query<{ metadata: Record<string, unknown>; actor_type: string }>(
        `SELECT metadata, actor_type FROM audit_events WHERE tenant_id = $1 AND type = 'tenant.tier_changed'`,
        [t.id],
      );
      expect(audit).toEqual([{ actor_type: 'system', metadata: { from: 'free', to: 'enterprise', via: 'cli' } }]);
    });

    it('tenants:email-otp-captcha refuses "on" while TURNSTILE_SECRET is unset (every email-code request would fail)', async () => {
      const t = await createTenant(db);
      const io = captureIo();
      expect(await runCli(['tenants:email-otp-captcha', t.slug, 'on'], io)).toBe(1);
      expect([...io.stdout, ...io.stderr].join('\n')).toMatch(/TURNSTILE_SECRET/);
      expect((await db.query<{ r: boolean }>(`SELECT email_otp_captcha_required AS r FROM tenants WHERE id = $1`, [t.id]))[0].r).toBe(false);
    });

    it('tenants:email-otp-captcha turns the email-OTP captcha requirement on and off', async () => {
      const t = await createTenant(db);
      const io = captureIo();
      process.env.TURNSTILE_SECRET = 'test-secret';
      resetConfigForTests();
      try {
        expect(await runCli(['tenants:email-otp-captcha', t.slug, 'on'], io)).toBe(0);
      } finally {
        delete process.env.TURNSTILE_SECRET;
        resetConfigForTests();
      }
      expect((await db.query<{ r: boolean }>(`SELECT email_otp_captcha_required AS r FROM tenants WHERE id = $1`, [t.id]))[0].r).toBe(true);
      expect(await runCli(['tenants:email-otp-captcha', t.slug, 'off'], io)).toBe(0);
      expect((await db.query<{ r: boolean }>(`SELECT email_otp_captcha_required AS r FROM tenants WHERE id = $1`, [t.id]))[0].r).toBe(false);
      expect(await runCli(['tenants:email-otp-captcha', t.slug, 'maybe'], io)).toBe(1);
      expect(await runCli(['tenants:email-otp-captcha', 'no-such-tenant', 'on'], io)).toBe(1);
      expect(await db.query(`SELECT 1 FROM audit_events WHERE tenant_id = $1 AND type = 'tenant.email_otp_captcha_changed'`, [t.id])).toHaveLength(2);
    });

    it('refuses an unknown slug, a bad tier, an unknown command and missing arguments with exit code 1', async () => {
      const io = captureIo();
      expect(await runCli(['tenants:set-tier', 'no-such-tenant', 'pro'], io)).toBe(1);
      expect(io.stderr.join('\n')).toContain('no tenant with slug "no-such-tenant"');
      expect(await runCli(['tenants:set-tier', tenant.slug, 'platinum'], io)).toBe(1);
      expect(io.stderr.join('\n')).toContain('tier must be one of free, pro, enterprise');
      expect(await runCli(['tenants:set-tier', tenant.slug], io)).toBe(1);
      expect(await runCli(['nope'], io)).toBe(1);
      expect(io.stderr.join('\n')).toContain('unknown command "nope"');
      expect(await runCli([], io)).toBe(1);
      const [row] = await db.query<{ tier: string }>(`SELECT tier FROM tenants WHERE id = $1`, [tenant.id]);
      expect(row.tier).toBe('free');
    });

    it('checks the arguments before connecting: a wrong invocation gets its usage message even when the database is unreachable', async () => {
      const url = process.env.DATABASE_URL;
      process.env.DATABASE_URL = 'postgres://postgres@127.0.0.1:1/none'; // nothing listens there
      resetConfigForTests();
      try {
        for (const argv of [['tenants:set-tier'], ['tenants:set-tier', 'x', 'gold'], ['tenants:email-otp-captcha', 'x', 'maybe'], ['keys:rotate', '--later'], ['guests:purge', 'now'], ['maintenance:sweep', 'x']]) {
          const io = captureIo();
          expect(await runCli(argv, io)).toBe(1);
          const out = io.stderr.join('\n');
          expect(out).toContain('usage: npm run cli -- <command> [args]');
          expect(out).not.toMatch(/ECONNREFUSED|failed:/);
        }
      } finally {
        process.env.DATABASE_URL = url;
        resetConfigForTests();
      }
    });

    it('a PostgreSQL that accepts connections and never answers fails the connection after DATABASE_CONNECT_TIMEOUT_MS, never a hang', async () => {
      // a black hole: accepts TCP, never speaks
      const sockets: Socket[] = [];
      const hole = createServer((s) => sockets.push(s));
      await new Promise<void>((r) => hole.listen(0, '127.0.0.1', r));
      const ds = createDataSource({ DATABASE_URL: `postgres://postgres@127.0.0.1:${(hole.address() as AddressInfo).port}/none`, DATABASE_POOL_SIZE: 1, DATABASE_CONNECT_TIMEOUT_MS: 300 });
      try {
        await expect(ds.initialize()).rejects.toThrow(/timeout/);
      } finally {
        await (ds.driver as unknown as { master?: { end: () => Promise<void> } }).master?.end().catch(() => undefined);
        for (const s of sockets) s.destroy();
        await new Promise((r) => hole.close(r));
      }
    });

    it('help (also --help and -h) lists every command', async () => {
      const io = captureIo();
      expect(await runCli(['help'], io)).toBe(0);
      for (const c of ['tenants:set-tier <slug> <free|pro|enterprise>', 'keys:rotate', 'guests:purge', 'help']) expect(io.stdout.join('\n')).toContain(c);
      for (const spelling of ['--help', '-h']) {
        const again = captureIo();
        expect(await runCli([spelling], again)).toBe(0);
        expect(again.stdout.join('\n')).toBe(io.stdout.join('\n'));
      }
    });

    it('guests:purge runs the purge now', async () => {
      const io = captureIo();
      expect(await runCli(['guests:purge'], io)).toBe(0);
      expect(io.stdout.join('\n')).toMatch(/purged \d+ guest\(s\) in \d+ tenant\(s\)/);
    });
  });
});
