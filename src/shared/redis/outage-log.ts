import { Logger } from '@nestjs/common';

/**
 * An 'error' listener for a Redis-backed client (ioredis, BullMQ queues and workers) that reports
 * an outage without flooding the log: one warning, then at most one per `quietMs` with how many
 * it held back. Without a listener BullMQ prints every reconnection failure as a raw stack.
 */
export function outageLog(log: Logger, what: string, quietMs = 60_000): (err: Error) => void {
  let last = -Infinity;
  let held = 0;
  return (err: Error) => {
    const now = Date.now();
    if (now - last < quietMs) {
      held++;
      return;
    }
    log.warn(`${what}: ${err.message}${held ? ` (${held} more since the last report)` : ''}`);
    last = now;
    held = 0;
  };
}

const NETWORK_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ECONNRESET']);

/** `host:port` of a connection URL, never its credentials. */
function endpoint(url: string | undefined, defaultPort: number): { host: string; port: string; text: string } | undefined {
  if (!url) return undefined;
  try {
    const u = new URL(url);
    const host = u.hostname || 'localhost';
    const port = u.port || String(defaultPort);
    return { host, port, text: `${host}:${port}` };
  } catch {
    return undefined;
  }
}

/**
 * The one line `node dist/main` and `node dist/worker` print when they cannot start. A failure to
 * reach PostgreSQL or Redis names the dependency and its address (from DATABASE_URL or REDIS_URL,
 * never the password): `cannot start: PostgreSQL at db:5432 (DATABASE_URL) unreachable: connect
 * ECONNREFUSED 10.0.0.5:5432`. Any other error (a bad configuration, a missing migration, a
 * signing key that cannot be decrypted) is its own message, which already says what to do.
 */
export function startupFailureLine(err: unknown, urls: { DATABASE_URL?: string; REDIS_URL?: string }): string {
  if (!(err instanceof Error)) return String(err);
  const e = err as Error & { code?: string; port?: number; address?: string; hostname?: string; severity?: string; errors?: unknown[] };
  // node's happy-eyeballs connect (a host name with several addresses) fails with an AggregateError and no message
  const first = Array.isArray(e.errors) && e.errors[0] instanceof Error ? (e.errors[0] as typeof e) : undefined;
  const detail = (e.message || first?.message || e.code || 'unknown error').split('\n')[0];
  const pg = endpoint(urls.DATABASE_URL, 5432);
  const redis = endpoint(urls.REDIS_URL, 6379);
  const code = e.code ?? first?.code;
  if (code && NETWORK_CODES.has(code)) {
    const port = String(e.port ?? first?.port ?? '');
    const host = e.hostname ?? first?.hostname;
    const isRedis = !!redis && (port === redis.port || host === redis.host) && !(pg && (port === pg.port || host === pg.host));
    if (isRedis) return `cannot start: Redis at ${redis.text} (REDIS_URL) unreachable: ${detail}`;
    // only an error about PostgreSQL's own address is blamed on it (HOST naming no address, say, is not)
    const isPg = !!pg && (port === pg.port || host === pg.host || (!port && !host));
    if (isPg) return `cannot start: PostgreSQL at ${pg.text} (DATABASE_URL) unreachable: ${detail}`;
  }
  // node-postgres: a server's refusal (a wrong password, no such database) or its connection timeout
  if (pg && (typeof e.severity === 'string' || /^Connection terminated/.test(e.message))) {
    return `cannot start: PostgreSQL at ${pg.text} (DATABASE_URL): ${detail}`;
  }
  return e.message || detail;
}
