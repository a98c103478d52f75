import { createHmac } from 'crypto';
import { domainToASCII } from 'url';
import { OnWorkerEvent, Processor, WorkerHost } from '@nestjs/bullmq';
import { Inject, Logger, OnApplicationShutdown } from '@nestjs/common';
import { Job, UnrecoverableError } from 'bullmq';
import { createTransport, Transporter } from 'nodemailer';
import mimeFuncs from 'nodemailer/lib/mime-funcs';
import { APP_CONFIG, AppConfig } from '../../config/config';
import { deriveKey } from '../crypto/client-hash';
import { EnvelopeCipher } from '../crypto/envelope-cipher';
import { Db } from '../db/db.service';
import { mailRetryDelayMs, openOutboxSecret, OutboxJobData, settleOutboxRow } from '../outbox/outbox-job';
import { MAIL_TOPIC, MailPayload } from './mail.service';
import { outageLog } from '../redis/outage-log';
import { countMail } from '../http/worker-metrics';
import { OUTBOX_MAX_STALLED_COUNT, outboxJobFailed } from '../outbox/stalled-jobs';
import { isMailTemplate, MailTemplateError, renderMail } from './templates';

/**
 * SMTP timeouts (ms), well below the worker's shutdown timeout (SHUTDOWN_TIMEOUT_MS, 25 s, in
 * src/worker.ts): a server that accepts the connection and then hangs fails the attempt (retried
 * later) instead of keeping the job active past a SIGTERM. Nodemailer's defaults are 2 min to
 * connect, 30 s for the greeting and 10 min of socket inactivity. A query parameter of SMTP_URL
 * of the same name (`?socketTimeout=...`) wins.
 */
export const SMTP_TIMEOUTS = { connectionTimeout: 5_000, greetingTimeout: 5_000, socketTimeout: 10_000 } as const;

/**
 * A header value that mail clients show as written. Nodemailer encodes a value holding non-ASCII
 * text but passes plain ASCII through, so a name that reads like an RFC 2047 encoded word
 * (`=?utf-8?B?...?=`, which a tenant or agent name may hold) would be decoded by the client into
 * whatever it encodes, outside every check the name passed (line breaks, bidirectional
 * overrides, another brand). Such a value is sent encoded whole, its `=?` encoded too, so it
 * reads back literally.
 */
export function literalHeader(value: string): string {
  return value.includes('=?') ? mimeFuncs.encodeWord(value, 'Q', 52) : value;
}

/**
 * Minutes left of a secret that lasts `lifetimeMinutes` from `createdAt` (the outbox row's time),
 * at `now`; undefined when the mail states no lifetime.
 */
export function lifetimeLeftMinutes(lifetimeMinutes: unknown, createdAt: string, now: number): number | undefined {
  const m = Number(lifetimeMinutes);
  const created = Date.parse(createdAt);
  if (lifetimeMinutes == null || !Number.isFinite(m) || m <= 0 || !Number.isFinite(created)) return undefined;
  return (created + m * 60_000 - now) / 60_000;
}

/** Mails sent at once by one worker process. */
export const MAIL_CONCURRENCY = 5;

/**
 * A pool of SMTP connections, one per mail sent at once, each reused for the next mail (up to
 * nodemailer's 100 messages) instead of a connection (and a TLS handshake, and a greeting) per
 * mail: a burst drains about twice as fast over a relay 100-500 ms away (SES, SendGrid, a
 * smarthost). A connection the server closed while idle is replaced.
 */
export const SMTP_POOL = { pool: true, maxConnections: MAIL_CONCURRENCY } as const;

/**
 * SMTP_URL with SMTP_TIMEOUTS and SMTP_POOL as query parameters (nodemailer reads its options
 * from them); one the operator's URL sets already is left as it is.
 */
export function smtpTransportUrl(smtpUrl: string): string {
  const url = new URL(smtpUrl);
  for (const [k, v] of Object.entries({ ...SMTP_TIMEOUTS, ...SMTP_POOL })) if (!url.searchParams.has(k)) url.searchParams.set(k, String(v));
  return url.toString();
}

/**
 * The key of mail Message-IDs (HKDF `info` of its own), from the current KEY_ENCRYPTION_KEY only:
 * a mail retried across a KEK rotation gets another Message-ID (KEY_ENCRYPTION_KEY_PREVIOUS is
 * not used here).
 */
export const messageIdKey = (kek: Buffer): Buffer => deriveKey(kek, 'authp:mail-message-id:v1');

/**
 * A mail's Message-ID: the same on every attempt (a receiver can tell a retried send from a new
 * mail), unique per outbox row, and opaque: 32 hex characters of HMAC-SHA256 under `key`
 * (messageIdKey: derived from KEY_ENCRYPTION_KEY), so it reveals neither the outbox sequence (how many mails and events
 * every tenant produced between two mails one receives) nor when the row was written.
 */
export function mailMessageId(key: Buffer, outboxId: string, createdAt: string | Date, domain: string): string {
  const id = createHmac('sha256', key).update(`${outboxId}.${new Date(createdAt).getTime()}`).digest('hex').slice(0, 32);
  return `<${id}@${domain}>`;
}

/**
 * The domain of a mail's Message-ID (RFC 5322 section 3.6.4: the sender's own, so ids are unique
 * and not another sender's): EMAIL_FROM's domain, `Name <box@domain>` or `box@domain`, as its
 * A-label (`bücher.example` is `xn--bcher-kva.example`, as nodemailer writes it in From), or
 * `localhost` when it has none.
 */
export function messageIdDomain(emailFrom: string): string {
  const address = /<([^<>]*)>\s*$/.exec(emailFrom)?.[1] ?? emailFrom;
  const at = address.lastIndexOf('@');
  return (at >= 0 && domainToASCII(address.slice(at + 1).trim())) || 'localhost';
}

/**
 * An SMTP failure to be retried, as BullMQ keeps it in the job (`failedReason`, `stacktrace`: up to
 * 14 days, past an erasure), naming no address. A server's reply is not kept at all: servers quote
 * the recipient in it (`451 4.3.2 <a@example.com>: try again`), and in whatever form they received
 * it (nodemailer sends an IDN domain as its A-label, a server may echo UTF-8 as Latin-1), so no
 * search for the stored form finds every copy; its reply code and enhanced status code say what
 * happened. Any other failure (a connection refused, a timeout: the text is nodemailer's) keeps its
 * text with every address-like token in it replaced.
 */
export function withoutAddress(err: unknown, to: string): unknown {
  if (!(err instanceof Error)) return err;
  const e = err as Error & { responseCode?: unknown; code?: unknown };
  let text: string;
  if (typeof e.responseCode === 'number') {
    const enhanced = /\b[245]\.\d{1,3}\.\d{1,3}\b/.exec(e.message)?.[0];
    text = `SMTP refused for now: ${e.responseCode}${enhanced ? ` ${enhanced}` : ''}${typeof e.code === 'string' ? ` (${e.code})` : ''}; the server's reply is not kept (it may quote the recipient)`;
  } else {
    const literal = to ? new RegExp(to.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'), 'gi') : undefined;
    text = (literal ? e.message.replace(literal, '<recipient>') : e.message).replace(/[^\s<>"'()@]+@[^\s<>"'()@]+/gu, '<address>');
    if (text === e.message) return err;
  }
  const redacted = new Error(text);
  redacted.name = err.name;
  return redacted;
}

/**
 * Sends the emails of the outbox (topic `email`): reads each from its outbox row (the job names
 * the row only), decrypts the secret fields only here, renders the template and hands it to SMTP_URL. A failure throws, so BullMQ retries (MAIL_RETRY_STEPS_SECONDS, about 25 hours);
 * a mail that can never be rendered, or that SMTP refused with a 5yz reply, fails at once. Without SMTP_URL (development and test
 * only; production refuses to start without it) the mail is logged so its link can be clicked.
 */
@Processor(MAIL_TOPIC, { concurrency: MAIL_CONCURRENCY, maxStalledCount: OUTBOX_MAX_STALLED_COUNT, settings: { backoffStrategy: (attemptsMade: number) => mailRetryDelayMs(attemptsMade) } })
export class MailProcessor extends WorkerHost implements OnApplicationShutdown {
  private readonly log = new Logger(MailProcessor.name);
  private readonly transport?: Transporter;
  private readonly messageIdDomain: string;
  private readonly messageIdKey: Buffer;

  constructor(
    private readonly db: Db,
    private readonly cipher: EnvelopeCipher,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {
    super();
    if (config.SMTP_URL) this.transport = createTransport(smtpTransportUrl(config.SMTP_URL));
    this.messageIdKey = messageIdKey(config.keyEncryptionKey);
    this.messageIdDomain = messageIdDomain(config.EMAIL_FROM);
  }

  async process(job: Job<OutboxJobData>): Promise<{ messageId?: string; logged?: true; expired?: true; withdrawn?: true }> {
    // every mail's event type is `email.<template>` (MailService.enqueue): anything else in this
    // queue is no mail, given up without a look at the database
    if (!job.data.eventType?.startsWith('email.')) throw new UnrecoverableError(`outbox ${job.data.outboxId}: not a mail (event ${String(job.data.eventType)})`);
    // the mail's outbox row is still owed: an erasure of its recipient (GDPR Art. 17) deletes the
    // unsent mails to the address, also those whose job waits in BullMQ (a retry after SMTP refused
    // for now, up to a day later), and a row settled already (sent by a run whose job did not
    // complete) is not sent twice. The same read gives the mail itself: its job carries only the
    // row's ids (ROW_READ_TOPICS), so the recipient's address, the template data and the encrypted
    // secret are never copied to Redis, where a finished job outlives an erasure and the outbox
    // sweep. A job queued by an older relay still carries them: the row wins there too
    const row = await this.owed(job);
    if (!row) {
      this.log.log({ msg: 'mail not sent: its outbox row is gone or settled (its recipient erased, or sent already)', outbox_id: job.data.outboxId, event: job.data.eventType });
      countMail('withdrawn');
      return { withdrawn: true };
    }
    const { to, template, data = {} } = row.payload as Partial<MailPayload>;
    if (typeof to !== 'string' || !to || !isMailTemplate(template)) {
      throw new UnrecoverableError(`outbox ${job.data.outboxId}: not a mail (template ${String(template)})`);
    }
    // an address with a second @ (a quoted local part, stored before they were refused) is read
    // differently by mail software: nodemailer sends "x@evil.com"@a.com to x@evil.com@a.com. Never
    // sent, rather than sent to a mailbox that may be someone else's
    if (to.indexOf('@') !== to.lastIndexOf('@')) throw new UnrecoverableError(`outbox ${job.data.outboxId}: the recipient address is ambiguous (a quoted local part); not sent`);
    // a link or code mail states how long its secret lasts, counted from the outbox row (written
    // with the secret): one that could not be sent before then (SMTP down, refusing with 4yz) is
    // dropped instead of handing its reader a dead link, and a late one states what is left
    const left = lifetimeLeftMinutes(data.expires_in_minutes, job.data.createdAt, Date.now());
    if (left !== undefined && left <= 0) {
      this.log.log({ msg: 'mail not sent: its link or code expired before it could be sent', outbox_id: job.data.outboxId, template });
      await this.settle(job);
      countMail('expired');
      return { expired: true };
    }
    const secret = openOutboxSecret(this.cipher, { secretEnc: row.secret_enc }) ?? {};
    let mail;
    try {
      mail = renderMail(template, {
        tenantName: await this.tenantName(job.data.tenantId, data),
        accountsUrl: this.config.ACCOUNTS_URL,
        data: left === undefined ? data : { ...data, expires_in_minutes: left },
        secret,
      });
    } catch (err) {
      if (err instanceof MailTemplateError) throw new UnrecoverableError(`outbox ${job.data.outboxId}: ${err.message}`);
      throw err;
    }
    if (!this.transport) {
      if (this.config.isProduction) throw new Error('SMTP_URL is not set');
      this.log.log({ msg: 'mail not sent (no SMTP_URL); its content:', to, subject: mail.subject, text: mail.text });
      await this.settle(job);
      countMail('sent');
      return { logged: true };
    }
    const info = await this.send(job, to, {
      from: this.config.EMAIL_FROM,
      to,
      subject: literalHeader(mail.subject),
      text: mail.text,
      html: mail.html,
      messageId: mailMessageId(this.messageIdKey, job.data.outboxId, job.data.createdAt, this.messageIdDomain),
      headers: { 'Auto-Submitted': 'auto-generated' },
    });
    await this.settle(job);
    countMail('sent');
    return { messageId: info.messageId };
  }

  /**
   * Hands the mail to SMTP. A 5yz reply refusing the recipient or the message (RFC 5321 section
   * 4.2.1: the same request must not be repeated) gives the mail up at once, its outbox row
   * settled; a 4yz reply, a connection failure or a refused login (the operator fixes SMTP_URL)
   * is retried. BullMQ keeps a failure's message in the job (`failedReason`, `stacktrace`, 14 days
   * for a job given up), and SMTP servers quote the recipient in their replies (`550 5.1.1
   * <a@example.com>: Recipient address rejected`): the error thrown names no address.
   */
  private async send(job: Job<OutboxJobData>, to: string, message: Parameters<Transporter['sendMail']>[0]): Promise<{ messageId: string }> {
    try {
      return await this.transport!.sendMail(message);
    } catch (err) {
      const e = err as { code?: string; responseCode?: number; message?: string };
      if ((e.code === 'EENVELOPE' || e.code === 'EMESSAGE') && typeof e.responseCode === 'number' && e.responseCode >= 500) {
        throw new UnrecoverableError(`outbox ${job.data.outboxId}: refused by the SMTP server (${e.responseCode}); not retried`);
      }
      throw withoutAddress(err, to);
    }
  }

  /**
   * The mail's outbox row while it is still owed (not settled; read by id and creation time: ids
   * repeat after a restore), with what the mail is made of; undefined once the row is gone
   * (its recipient erased) or settled.
   */
  private async owed(job: Job<OutboxJobData>): Promise<{ payload: Record<string, unknown>; secret_enc: string | null } | undefined> {
    // createdAt went through a JS Date: milliseconds, the row has microseconds
    const [row] = await this.db.query<{ payload: Record<string, unknown>; secret_enc: string | null }>(
      `SELECT payload, secret_enc FROM outbox WHERE id = $1::bigint AND processed_at IS NULL AND created_at > $2::timestamptz - interval '1 millisecond' AND created_at < $2::timestamptz + interval '1 millisecond'`,
      [job.data.outboxId, job.data.createdAt],
      'outbox_mail_owed',
    );
    return row;
  }

  /**
   * The mail left (or will never leave): its outbox row is settled (its encrypted secret
   * forgotten), so the queue reconciler does not queue it again. A failed write is only logged:
   * the completed job stays in Redis for a day, longer than the reconciler looks back, so the mail
   * is not sent twice.
   */
  private async settle(job: Job<OutboxJobData>): Promise<void> {
    await settleOutboxRow(this.db, job.data.outboxId).catch((e: Error) => this.log.warn(`settling outbox ${job.data.outboxId}: ${e.message}`));
  }

  /** A mail given up (out of attempts, never renderable, or killing its workers) is settled. Counted: given_up, or retried. */
  @OnWorkerEvent('failed')
  onFailed(job: Job<OutboxJobData> | undefined, err: Error): void {
    if (!job) return;
    const givenUp = outboxJobFailed(job, err, this.log, `mail ${job.data.eventType}`);
    countMail(givenUp ? 'given_up' : 'retried');
    if (givenUp) void this.settle(job);
  }

  private readonly outage = outageLog(this.log, 'mail worker');

  @OnWorkerEvent('error')
  onError(err: Error): void {
    this.outage(err);
  }

  onApplicationShutdown(): void {
    this.transport?.close();
  }

  private async tenantName(tenantId: string | null, data: Record<string, unknown>): Promise<string> {
    if (typeof data.tenant_name === 'string' && data.tenant_name.trim()) return data.tenant_name.trim();
    if (tenantId) {
      const [t] = await this.db.query<{ name: string }>(`SELECT name FROM tenants WHERE id = $1`, [tenantId], 'mail_tenant_name');
      if (t) return t.name;
    }
    return 'your account';
  }
}
