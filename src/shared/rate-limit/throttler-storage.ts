import { ThrottlerStorageRedisService } from '@nest-lab/throttler-storage-redis';
import Redis from 'ioredis';

type ThrottlerRecord = Awaited<ReturnType<ThrottlerStorageRedisService['increment']>>;
type ScriptRunner = (hitKey: string, blockKey: string, name: string, ttl: number, limit: number, blockDuration: number) => Promise<unknown>;

const COMMAND = 'authpThrottlerIncrement';

/** The storage's Redis keys of one counter (the library's layout; the hash tag keeps both in one slot). */
export function throttlerKeys(key: string, name: string): { hits: string; blocked: string } {
  return { hits: `{${key}:${name}}:hits`, blocked: `{${key}:${name}}:blocked` };
}

/**
 * The @nest-lab/throttler-storage-redis storage (same keys, same Lua script, same answers), with
 * the script run by its SHA1 (EVALSHA through ioredis `defineCommand`: the script's ~900 bytes go
 * once per connection, and again after Redis forgot it) instead of with every hit as the
 * library's EVAL does.
 */
export class ThrottlerStorage extends ThrottlerStorageRedisService {
  private readonly run: ScriptRunner;

  constructor(redis: Redis) {
    super(redis);
    if (!(COMMAND in redis)) redis.defineCommand(COMMAND, { numberOfKeys: 2, lua: this.scriptSrc });
    const fn = (redis as unknown as Record<string, ScriptRunner>)[COMMAND];
    this.run = fn.bind(redis);
  }

  override async increment(key: string, ttl: number, limit: number, blockDuration: number, throttlerName: string): Promise<ThrottlerRecord> {
    const { hits, blocked } = throttlerKeys(key, throttlerName);
    const results = await this.run(hits, blocked, throttlerName, ttl, limit, blockDuration);
    if (!Array.isArray(results) || results.length !== 4 || results.some((n) => typeof n !== 'number')) {
      throw new TypeError(`Unexpected throttler script result: ${JSON.stringify(results)}`);
    }
    const [totalHits, timeToExpire, isBlocked, timeToBlockExpire] = results as number[];
    return {
      totalHits,
      timeToExpire: Math.ceil(timeToExpire / 1000),
      isBlocked: isBlocked === 1,
      timeToBlockExpire: Math.ceil(timeToBlockExpire / 1000),
    };
  }
}
