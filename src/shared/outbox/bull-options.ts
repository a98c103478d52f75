import type { RedisOptions } from 'bullmq';
import type { AppConfig } from '../../config/config';
import { RedisConnectionConfig, redisConnectionOptions } from '../redis/redis.module';

/**
 * Prefix of every BullMQ key: REDIS_KEY_PREFIX + `bull` (`authp:bull:email:...`), so test runs
 * and co-hosted deployments with their own REDIS_KEY_PREFIX never share queues.
 */
export function bullPrefix(config: Pick<AppConfig, 'REDIS_KEY_PREFIX'>): string {
  return `${config.REDIS_KEY_PREFIX}bull`;
}

/**
 * ioredis options for BullMQ's own connections, from REDIS_URL (or REDIS_SENTINELS: see
 * redisConnectionOptions). BullMQ refuses an ioredis `keyPrefix` (it has `prefix`) and needs
 * `maxRetriesPerRequest: null` on blocking connections.
 */
export function bullConnection(config: RedisConnectionConfig): RedisOptions {
  return { ...redisConnectionOptions(config), maxRetriesPerRequest: null } as RedisOptions;
}
