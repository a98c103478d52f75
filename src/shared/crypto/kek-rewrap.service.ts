import { Inject, Injectable } from '@nestjs/common';
import { JobType, Queue } from 'bullmq';
import { APP_CONFIG, AppConfig } from '../../config/config';
import { Db } from '../db/db.service';
import { bullConnection, bullPrefix } from '../outbox/bull-options';
import type { OutboxJobData } from '../outbox/outbox-job';
import { EnvelopeCipher } from './envelope-cipher';

/** A column of EnvelopeCipher envelopes, and the primary key its rows are walked by. */
export interface EnvelopeColumn {
  table: string;
  column: string;
  /** primary key columns with their types, in index order */
  key: readonly (readonly [name: string, type: 'uuid' | 'text' | 'bigint'])[];
}

/**
 * Every column holding envelopes (EnvelopeCipher.encrypt). A new encrypted column is added here,
 * or `kek:rewrap` leaves it under the old key and KEY_ENCRYPTION_KEY_PREVIOUS can never go.
 */
export const ENVELOPE_COLUMNS: readonly EnvelopeColumn[] = [
  { table: 'signing_keys', column: 'private_enc', key: [['kid', 'text']] },
  { table: 'user_mfa_factors', column: 'secret_enc', key: [['id', 'uuid']] },
  { table: 'users', column: 'date_of_birth_enc', key: [['id', 'uuid']] },
  { table: 'webhook_endpoints', column: 'secret_enc', key: [['id', 'uuid']] },
  { table: 'webhook_endpoints', column: 'previous_secret_enc', key: [['id', 'uuid']] },
  { table: 'tenants', column: 'byok_twilio_auth_token_enc', key: [['id', 'uuid']] },
  { table: 'outbox', column: 'secret_enc', key: [['id', 'bigint']] },
  { table: 'idempotency_keys', column: 'secret_enc', key: [['scope', 'text'], ['key', 'text']] },
];

/** Rows read and updated per statement. */
export const REWRAP_BATCH_SIZE = 500;
/** How many primary keys of undecryptable rows a report names per column. */
const NAMED_ROWS = 5;
/** Job states whose data a worker may still read (completed jobs are never opened again). */
const LIVE_JOB_STATES: JobType[] = ['wait', 'prioritized', 'delayed', 'waiting-children', 'active', 'failed'];

export interface RewrapCounts {
  /** wrapped under an earlier key, now under the current one */
  rewrapped: number;
  /** under the current key already */
  current: number;
  /** opened by no configured key (or not an envelope) */
  undecryptable: number;
  /** changed by someone else between the read and the update: left as written, seen again by the next run */
  changed: number;
}

export interface ColumnReport extends RewrapCounts {
  table: string;
  column: string;
  /** primary keys (joined with `/`) of some undecryptable rows, at most NAMED_ROWS */
  undecryptableKeys: string[];
}

export interface JobsReport extends RewrapCounts {
  queues: string[];
  /** set when Redis could not be read: the jobs were not checked */
  error?: string;
}

export interface RecoveryCodesReport {
  /** users with unused codes hashed under the current key */
  current: number;
  /** users with unused codes under each earlier key, by its position in KEY_ENCRYPTION_KEY_PREVIOUS (1 = first) */
  previous: number[];
  /** users with unused codes made before key ids were recorded (under whichever key was current then) */
  unrecorded: number;
  /** users with unused codes under a key that is not configured at all (they no longer verify) */
  unknown: number;
}

const zero = (): RewrapCounts => ({ rewrapped: 0, current: 0, undecryptable: 0, changed: 0 });

/**
 * `npm run cli -- kek:rewrap`: moves every envelope's data key under the current
 * KEY_ENCRYPTION_KEY (EnvelopeCipher.rewrap: the ciphertext and its AAD binding unchanged, no
 * plaintext opened), in PostgreSQL and in the queued BullMQ jobs' `secretEnc`, and counts the
 * recovery codes that cannot be moved. Idempotent: a second run finds everything current.
 */
@Injectable()
export class KekRewrapService {
  constructor(
    private readonly db: Db,
    private readonly cipher: EnvelopeCipher,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  /**
   * One column, in batches of REWRAP_BATCH_SIZE rows walked by primary key. Each update is
   * conditional on the value read (`AND col = old`), so a value written meanwhile (a rotated
   * webhook secret, a new TOTP seed) is never overwritten with an older one.
   */
  async rewrapColumn(c: EnvelopeColumn, batchSize = REWRAP_BATCH_SIZE): Promise<ColumnReport> {
    const report: ColumnReport = { table: c.table, column: c.column, ...zero(), undecryptableKeys: [] };
    const keyList = c.key.map(([name]) => name).join(', ');
    const keyOut = c.key.map(([name], i) => `${name}::text AS k${i}`).join(', ');
    let after: string[] | undefined;
    for (;;) {
      const where = after ? `AND (${keyList}) > (${c.key.map(([, type], i) => `$${i + 2}::${type}`).join(', ')})` : '';
      const rows = await this.db.query<Record<string, string>>(
        `SELECT ${keyOut}, ${c.column} AS v FROM ${c.table} WHERE ${c.column} IS NOT NULL ${where} ORDER BY ${keyList} LIMIT $1`,
        [batchSize, ...(after ?? [])],
      );
      if (!rows.length) return report;
      const updates: { keys: string[]; old: string; next: string }[] = [];
      for (const r of rows) {
        const keys = c.key.map((_, i) => r[`k${i}`]);
        let next: string | null;
        try {
          next = this.cipher.rewrap(r.v);
        } catch {
          report.undecryptable++;
          if (report.undecryptableKeys.length < NAMED_ROWS) report.undecryptableKeys.push(keys.join('/'));
          continue;
        }
        if (next === null) report.current++;
        else updates.push({ keys, old: r.v, next });
      }
      if (updates.length) {
        const arrays = c.key.map((_, i) => `$${i + 3}::text[]`).join(', ');
        const keyCols = c.key.map((_, i) => `k${i}`).join(', ');
        const match = c.key.map(([name, type], i) => `t.${name} = v.k${i}::${type}`).join(' AND ');
        const { rowCount } = await this.db.exec(
          `UPDATE ${c.table} AS t SET ${c.column} = v.next_value
             FROM unnest($1::text[], $2::text[], ${arrays}) AS v(old_value, next_value, ${keyCols})
            WHERE ${match} AND t.${c.column} = v.old_value`,
          [updates.map((u) => u.old), updates.map((u) => u.next), ...c.key.map((_, i) => updates.map((u) => u.keys[i]))],
        );
        report.rewrapped += rowCount;
        report.changed += updates.length - rowCount;
      }
      const last = rows[rows.length - 1];
      after = c.key.map((_, i) => last[`k${i}`]);
      if (rows.length < batchSize) return report;
    }
  }

  /**
   * The `secretEnc` of the jobs of `queues` a worker may still run (BullMQ job data in Redis, a
   * copy of the outbox row's; mail jobs carry none since ROW_READ_TOPICS, but those an older relay
   * queued), re-wrapped in place (Job.updateData). Short-lived: a job settles
   * within minutes, or hours for a mail retried while its SMTP server is away. A job that finished
   * while it was looked at is skipped.
   */
  async rewrapJobs(queues: readonly string[]): Promise<JobsReport> {
    const report: JobsReport = { queues: [...queues], ...zero() };
    // fails fast instead of waiting for a Redis that is away: the report says the jobs were not checked
    const connection = { ...bullConnection(this.config), maxRetriesPerRequest: 1 };
    for (const name of queues) {
      const queue = new Queue<OutboxJobData>(name, { connection, prefix: bullPrefix(this.config) });
      queue.on('error', () => undefined); // the failing command below reports it
      try {
        for (const state of LIVE_JOB_STATES) {
          // a page at a time; a job that moved between pages may be seen twice (then current) or not at all
          for (let start = 0; ; start += REWRAP_BATCH_SIZE) {
            const jobs = await queue.getJobs([state], start, start + REWRAP_BATCH_SIZE - 1, true);
            for (const job of jobs) {
              const enc = job.data?.secretEnc;
              if (!enc) continue;
              let next: string | null;
              try {
                next = this.cipher.rewrap(enc);
              } catch {
                report.undecryptable++;
                continue;
              }
              if (next === null) {
                report.current++;
                continue;
              }
              try {
                await job.updateData({ ...job.data, secretEnc: next });
                report.rewrapped++;
              } catch (e) {
                // removed meanwhile (it finished: its data is never read again)
                if (!/missing key|not exist/i.test((e as Error).message)) throw e;
              }
            }
            if (jobs.length < REWRAP_BATCH_SIZE) break;
          }
        }
      } catch (e) {
        report.error = (e as Error).message;
        return report;
      } finally {
        await queue.close().catch(() => undefined);
      }
    }
    return report;
  }

  /** Users holding unused recovery codes, by the key their codes are hashed under (mfa_recovery_codes.key_id). */
  async recoveryCodes(): Promise<RecoveryCodesReport> {
    const rows = await this.db.query<{ key_id: string | null; users: number }>(
      `SELECT key_id, count(DISTINCT user_id)::int AS users FROM mfa_recovery_codes WHERE used_at IS NULL GROUP BY key_id`,
    );
    const ids = this.cipher.keyIds;
    const report: RecoveryCodesReport = { current: 0, previous: ids.slice(1).map(() => 0), unrecorded: 0, unknown: 0 };
    for (const r of rows) {
      const i = r.key_id === null ? -2 : ids.indexOf(r.key_id);
      if (i === -2) report.unrecorded += r.users;
      else if (i === 0) report.current += r.users;
      else if (i > 0) report.previous[i - 1] += r.users;
      else report.unknown += r.users;
    }
    return report;
  }
}
