import { Global, Inject, Module, OnApplicationShutdown } from '@nestjs/common';
import Redis from 'ioredis';
import { APP_CONFIG, AppConfig } from '../../config/config';

export const REDIS = Symbol('REDIS');

/** One ioredis client per process; every key carries REDIS_KEY_PREFIX. */
export function createRedis(config: Pick<AppConfig, 'REDIS_URL' | 'REDIS_KEY_PREFIX'>, extra: { maxRetriesPerRequest?: number | null } = {}): Redis {
  return new Redis(config.REDIS_URL, {
    keyPrefix: config.REDIS_KEY_PREFIX,
    maxRetriesPerRequest: extra.maxRetriesPerRequest === undefined ? 1 : extra.maxRetriesPerRequest,
    enableOfflineQueue: true,
    // commands issued in the same tick by concurrent requests leave in one write (fewer syscalls)
    enableAutoPipelining: true,
    connectTimeout: 2000,
    lazyConnect: false,
  });
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
