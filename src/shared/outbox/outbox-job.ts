import type { JobsOptions } from 'bullmq';
import type { EnvelopeCipher } from '../crypto/envelope-cipher';
import type { Queryable } from '../db/db.service';

/**
 * The data of every job the outbox relay queues: the outbox row's ids, and for most topics its
 * payload and encrypted secret (`secretEnc`, so Redis never holds a secret in plaintext; a
 * processor opens it with `openOutboxSecret`). Jobs of ROW_READ_TOPICS carry the ids only.
 */
export interface OutboxJobData {
  /** outbox.id (bigint as a string); the job id is outboxJobId(outboxId, createdAt) */
  outboxId: string;
  tenantId: string | null;
  /** e.g. `email.password_reset`, `tenant.created`; also the BullMQ job name */
  eventType: string;
  /** the row's payload; absent in a job of ROW_READ_TOPICS (its processor reads the row) */
  payload?: Record<string, unknown>;
  /** the row's encrypted secret fields; absent in a job of ROW_READ_TOPICS */
  secretEnc?: string | null;
  /** RFC 3339 */
  createdAt: string;
}

/**
 * Topics whose jobs carry only the row's ids, their processor reading payload and secret from the
 * outbox row itself: mail (`email`). A mail's payload holds its recipient's address and template
 * data, its secret a link token or code; BullMQ keeps a finished job a day and a failed one 14
 * days (DEFAULT_OUTBOX_JOB_OPTIONS), longer than OUTBOX_RETENTION_DAYS may keep the row and out
 * of reach of an erasure, which deletes or settles the rows (settling forgets the secret). With
 * the row as the only copy, the address lives where the erasure and the outbox sweep find it.
 * Webhook fan-out jobs keep their payload: it holds ids only (webhook-events.ts), and the fan-out
 * settles the row in the same statement that reads the endpoints. A mail job queued by an older
 * relay still carries payload and secret: its processor ignores them and reads the row too.
 */
export const ROW_READ_TOPICS: ReadonlySet<string> = new Set(['email']);

/**
 * The BullMQ job id of an outbox row: a second add of the same row is a no-op (BullMQ dedupes
 * ids). The row's creation time is part of it: after PostgreSQL went back in time (a restore from
 * backup, a failover to a replica that lagged) its sequence hands out ids again, and a new row
 * must not meet the finished job of the old one with its id (kept a day) and be dropped unsent.
 */
export function outboxJobId(outboxId: string | number, createdAt: Date | string): string {
  return `outbox-${outboxId}-${new Date(createdAt).getTime()}`;
}

/**
 * Records that an outbox row's job settled: its consumer finished it, or gave up for good. Rows
 * relayed but never settled are re-queued by the queue reconciler (a Redis data loss drops jobs).
 * The SQL, for a consumer that settles inside its own statement: SETTLE_OUTBOX_SQL with $1.
 */
export async function settleOutboxRow(db: Queryable, outboxId: string): Promise<void> {
  await db.query(SETTLE_OUTBOX_SQL('$1'), [outboxId], 'outbox_settle');
}

/** Settling also forgets the row's encrypted link token or code: nothing reads it once its job settled. */
export const SETTLE_OUTBOX_SQL = (idParam: string) =>
  `UPDATE outbox SET processed_at = now(), secret_enc = NULL WHERE id = ${idParam}::bigint AND processed_at IS NULL`;

/** Decrypts a job's (or an outbox row's) secret fields (link tokens, codes); undefined when there are none. */
export function openOutboxSecret<T extends Record<string, unknown> = Record<string, unknown>>(cipher: EnvelopeCipher, data: { secretEnc?: string | null }): T | undefined {
  return data.secretEnc ? (JSON.parse(cipher.decryptString(data.secretEnc)) as T) : undefined;
}

/**
 * Retries of every outbox job: 12 attempts, exponential backoff from 1 s (about an hour in
 * all). Completed jobs are kept a day: while a job is kept, re-adding its id is a no-op, which
 * covers a relay that crashed between the add and its commit.
 */
export const DEFAULT_OUTBOX_JOB_OPTIONS: JobsOptions = {
  attempts: 12,
  backoff: { type: 'exponential', delay: 1000, jitter: 0.2 },
  removeOnComplete: { age: 24 * 3600 },
  removeOnFail: { age: 14 * 24 * 3600 },
};

/**
 * Seconds to wait after the n-th failed send of a mail (the last step repeats until the attempts
 * run out): quick retries for a blip, then as an MTA does, hours apart for about 25 hours in all,
 * so an SMTP relay down for a night loses no mail.
 */
export const MAIL_RETRY_STEPS_SECONDS = [1, 5, 30, 120, 300, 600, 1200, 1800, 3600, 3600, 7200, 7200, 10800, 10800, 10800, 10800, 10800, 10800] as const;

/** Delay before the next send after `failedAttempts` failures (1 = after the first), with up to 10% jitter. */
export function mailRetryDelayMs(failedAttempts: number, random = Math.random()): number {
  const i = Math.min(Math.max(failedAttempts, 1), MAIL_RETRY_STEPS_SECONDS.length) - 1;
  return Math.round(MAIL_RETRY_STEPS_SECONDS[i] * 1000 * (1 + 0.1 * random));
}

/** Per-topic overrides of DEFAULT_OUTBOX_JOB_OPTIONS (a topic whose retries differ adds a line here). */
export const TOPIC_JOB_OPTIONS: Readonly<Record<string, JobsOptions>> = {
  // mail (MailProcessor's backoffStrategy 'mail': MAIL_RETRY_STEPS_SECONDS)
  email: { attempts: MAIL_RETRY_STEPS_SECONDS.length + 1, backoff: { type: 'mail' } },
  // webhook fan-out (src/modules/webhooks): retried for about 36 hours, as long as deliveries are
  webhook: { attempts: 18 },
};

export function jobOptionsFor(topic: string): JobsOptions {
  return { ...DEFAULT_OUTBOX_JOB_OPTIONS, ...TOPIC_JOB_OPTIONS[topic] };
}
