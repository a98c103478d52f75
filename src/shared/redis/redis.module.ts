import { Global, Inject, Logger, Module, OnApplicationShutdown } from '@nestjs/common';
import Redis from 'ioredis';
import { APP_CONFIG, AppConfig } from '../../config/config';

export const REDIS = Symbol('REDIS');

const logger = new Logger('Redis');

/** One ioredis client per process; every key carries REDIS_KEY_PREFIX. */
export function createRedis(
  config: Pick<AppConfig, 'REDIS_URL' | 'REDIS_KEY_PREFIX'> & Partial<Pick<AppConfig, 'REDIS_COMMAND_TIMEOUT_MS'>>,
  extra: { maxRetriesPerRequest?: number | null } = {},
): Redis {
  const client = new Redis(config.REDIS_URL, {
    // a Redis that stops answering without closing the connection (a stalled server, a network
    // that drops packets, a failover in progress) fails its commands after this long: requests
    // answer 503 and /ready fails instead of hanging. A command sent may still run once Redis
    // resumes (a timeout is not "not executed"): where a late run would wrong someone (a sign-in
    // attempt counted), its caller sends the undo after it. No blocking commands use this client.
    commandTimeout: config.REDIS_COMMAND_TIMEOUT_MS ?? 2000,
    keyPrefix: config.REDIS_KEY_PREFIX,
    maxRetriesPerRequest: extra.maxRetriesPerRequest === undefined ? 1 : extra.maxRetriesPerRequest,
    enableOfflineQueue: true,
    // commands issued in the same tick by concurrent requests leave in one write (fewer syscalls)
    enableAutoPipelining: true,
    connectTimeout: 1000,
    // while Redis is away, a command waits in the offline queue for the next reconnection attempt
    // and fails after one (maxRetriesPerRequest): attempts at most 250 ms apart, so a request that
    // needs Redis fails closed (503) in well under a second instead of up to 2 s (the default)
    retryStrategy: (times) => Math.min(times * 50, 250),
    lazyConnect: false,
  });
  // connection errors are expected while Redis is away: one warning per outage, not ioredis'
  // unstructured "Unhandled error event" for every reconnection attempt
  let failing = false;
  client.on('error', (err: Error) => {
    if (failing) return;
    failing = true;
    logger.warn(`Redis unreachable (${err.message}); commands fail until it is back`);
  });
  client.on('ready', () => {
    if (failing) logger.log('Redis reachable again');
    failing = false;
  });
  return client;
}

class RedisCloser implements OnApplicationShutdown {
  constructor(@Inject(REDIS) private readonly redis: Redis) {}
  async onApplicationShutdown(): Promise<void> {
    await this.redis.quit().catch(() => this.redis.disconnect());
  }
}

@Global()
@Module({
  providers: [
    { provide: REDIS, inject: [APP_CONFIG], useFactory: (config: AppConfig) => createRedis(config) },
    RedisCloser,
  ],
  exports: [REDIS],
})
export class RedisModule {}
