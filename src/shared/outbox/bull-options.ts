import type { RedisOptions } from 'bullmq';
import type { AppConfig } from '../../config/config';

/**
 * Prefix of every BullMQ key: REDIS_KEY_PREFIX + `bull` (`authp:bull:email:...`), so test runs
 * and co-hosted deployments with their own REDIS_KEY_PREFIX never share queues.
 */
export function bullPrefix(config: Pick<AppConfig, 'REDIS_KEY_PREFIX'>): string {
  return `${config.REDIS_KEY_PREFIX}bull`;
}

/**
 * ioredis options for BullMQ's own connections, from REDIS_URL. BullMQ refuses an ioredis
 * `keyPrefix` (it has `prefix`) and needs `maxRetriesPerRequest: null` on blocking connections.
 */
export function bullConnection(config: Pick<AppConfig, 'REDIS_URL'>): RedisOptions {
  const url = new URL(config.REDIS_URL);
  const db = url.pathname.replace(/^\//, '');
  return {
    host: url.hostname || '127.0.0.1',
    port: url.port ? Number(url.port) : 6379,
    username: url.username ? decodeURIComponent(url.username) : undefined,
    password: url.password ? decodeURIComponent(url.password) : undefined,
    db: db ? Number(db) : undefined,
    tls: url.protocol === 'rediss:' ? {} : undefined,
    maxRetriesPerRequest: null,
  };
}
