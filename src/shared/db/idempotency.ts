import { Inject, Injectable } from '@nestjs/common';
import { APP_CONFIG, AppConfig } from '../../config/config';
import { EnvelopeCipher } from '../crypto/envelope-cipher';
import { sha256Hex } from '../crypto/tokens';
import { AppError } from '../errors/app-error';
import { Db, Queryable } from './db.service';

export interface IdempotentResult<T> {
  status: number;
  body: T;
  /** returned to the caller again on a replay (e.g. a session cookie), stored encrypted */
  secret?: Record<string, string>;
  replayed: boolean;
}

/** Canonical hash of a request body (keys sorted), minus fields that legitimately differ on retry. */
export function requestHash(body: Record<string, unknown>, omit: string[] = []): string {
  const keys = Object.keys(body).filter((k) => !omit.includes(k)).sort();
  return sha256Hex(JSON.stringify(keys.map((k) => [k, body[k]])));
}

/**
 * Idempotency keys: the first request with a key runs `fn` in a transaction that also stores
 * its answer; the same key again returns that answer and creates nothing. Two parallel
 * requests with one key: the second waits on the first's row lock, then replays its answer.
 * The same key with a different request is 409 idempotency/conflict.
 */
@Injectable()
export class IdempotencyService {
  constructor(
    private readonly db: Db,
    private readonly cipher: EnvelopeCipher,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  /**
   * Whether `key` already holds this request (the same hash, answered: a request still running
   * has not committed its row, so it is not seen): the caller may then skip a check the first
   * request passed and that cannot be passed twice (a single-use bot-challenge token), and call
   * `run` with `replayOnly`, which then answers the stored result (or refuses, never runs `fn`).
   */
  async holds(scope: string, key: string, hash: string): Promise<boolean> {
    const rows = await this.db.query(`SELECT 1 FROM idempotency_keys WHERE scope = $1 AND key = $2 AND request_hash = $3 AND expires_at >= now()`, [scope, sha256Hex(key), hash]);
    return rows.length > 0;
  }

  async run<T>(
    scope: string,
    key: string,
    hash: string,
    fn: (tx: Queryable) => Promise<{ status: number; body: T; secret?: Record<string, string> }>,
    opts: { replayOnly?: boolean } = {},
  ): Promise<IdempotentResult<T>> {
    const k = sha256Hex(key);
    await this.db.query(`DELETE FROM idempotency_keys WHERE scope = $1 AND key = $2 AND expires_at < now()`, [scope, k]);
    const first = await this.db.tx(async (tx) => {
      const claimed = await tx.query(
        `INSERT INTO idempotency_keys (scope, key, request_hash, expires_at)
         VALUES ($1, $2, $3, now() + make_interval(secs => $4)) ON CONFLICT DO NOTHING RETURNING key`,
        [scope, k, hash, this.config.IDEMPOTENCY_TTL_SECONDS],
      );
      if (!claimed.length) return undefined;
      // the caller skipped a check because `holds` saw this request, whose row expired since:
      // nothing is created without that check (the claim rolls back)
      if (opts.replayOnly) throw new AppError('idempotency/conflict', 'This idempotency_key has expired; send the request again with a new key');
      const result = await fn(tx);
      await tx.query(`UPDATE idempotency_keys SET status_code = $3, response = $4, secret_enc = $5 WHERE scope = $1 AND key = $2`, [
        scope,
        k,
        result.status,
        JSON.stringify(result.body),
        result.secret ? this.cipher.encrypt(JSON.stringify(result.secret)) : null,
      ]);
      return { ...result, replayed: false };
    });
    if (first) return first;
    const [row] = await this.db.query<{ request_hash: string; status_code: number | null; response: T; secret_enc: string | null }>(
      `SELECT request_hash, status_code, response, secret_enc FROM idempotency_keys WHERE scope = $1 AND key = $2`,
      [scope, k],
    );
    if (!row || row.status_code === null) throw new AppError('idempotency/conflict', 'A request with this idempotency key is in progress');
    if (row.request_hash !== hash) throw new AppError('idempotency/conflict');
    return {
      status: row.status_code,
      body: row.response,
      secret: row.secret_enc ? JSON.parse(this.cipher.decryptString(row.secret_enc)) : undefined,
      replayed: true,
    };
  }
}
