import { ThrottlerStorageRedisService } from '@nest-lab/throttler-storage-redis';
import Redis from 'ioredis';

type ThrottlerRecord = Awaited<ReturnType<ThrottlerStorageRedisService['increment']>>;

const CHAIN_COMMAND = 'authpThrottlerIncrementChain';

/**
 * Fixed-window counters in declared order, in one script call (the keys of the library's layout,
 * see throttlerKeys). A counter whose block is running is not counted: a refused request uses up
 * nothing, so a client that keeps retrying while blocked is let through once the wait it was given
 * (Retry-After) is over. Otherwise it is counted, and past its limit it blocks for blockDuration.
 * Once one counter refuses, the counters after it are not counted either (their running block,
 * if any, is read). KEYS: hits and blocked key of each counter; ARGV: ttl, limit, blockDuration of
 * each (ms). Answers 5 numbers per counter: totalHits (its count now), timeToExpire, isBlocked,
 * timeToBlockExpire (ms), counted (1 or 0).
 */
const CHAIN_SCRIPT = `
local out = {}
local refused = false
for i = 1, #KEYS / 2 do
  local hitKey = KEYS[2 * i - 1]
  local blockKey = KEYS[2 * i]
  local ttl = tonumber(ARGV[3 * i - 2])
  local limit = tonumber(ARGV[3 * i - 1])
  local blockDuration = tonumber(ARGV[3 * i])
  local blockLeft = redis.call('PTTL', blockKey)
  if refused or blockLeft > 0 then
    local hits = tonumber(redis.call('GET', hitKey) or '0')
    local left = math.max(redis.call('PTTL', hitKey), 0)
    if blockLeft > 0 then
      refused = true
      table.insert(out, hits); table.insert(out, left); table.insert(out, 1); table.insert(out, blockLeft); table.insert(out, 0)
    else
      table.insert(out, hits); table.insert(out, left); table.insert(out, 0); table.insert(out, 0); table.insert(out, 0)
    end
  else
    local totalHits = redis.call('INCR', hitKey)
    local timeToExpire = redis.call('PTTL', hitKey)
    if timeToExpire <= 0 then
      redis.call('PEXPIRE', hitKey, ttl)
      timeToExpire = ttl
    end
    if totalHits > limit then
      redis.call('SET', blockKey, 1, 'PX', blockDuration)
      refused = true
      table.insert(out, totalHits); table.insert(out, timeToExpire); table.insert(out, 1); table.insert(out, blockDuration); table.insert(out, 1)
    else
      table.insert(out, totalHits); table.insert(out, timeToExpire); table.insert(out, 0); table.insert(out, 0); table.insert(out, 1)
    end
  end
end
return out
`
  .replace(/^\s+/gm, '')
  .trim();

/** One counter of `incrementInOrder`. */
export interface ChainedCounter {
  key: string;
  name: string;
  ttl: number;
  limit: number;
  blockDuration: number;
}

/** The answer for one counter of `incrementInOrder`; `counted` false: it was blocked, or an earlier counter refused. */
export type ChainedRecord = ThrottlerRecord & { counted: boolean };

/** The storage's Redis keys of one counter (the library's layout; the hash tag keeps both in one slot). */
export function throttlerKeys(key: string, name: string): { hits: string; blocked: string } {
  return { hits: `{${key}:${name}}:hits`, blocked: `{${key}:${name}}:blocked` };
}

/**
 * The @nest-lab/throttler-storage-redis storage (same keys and record shape), with one change to
 * its counting: a hit while blocked is not counted and reports the count as it stands (see
 * CHAIN_SCRIPT); and the script is run by its SHA1
 * (EVALSHA through ioredis `defineCommand`: the script goes once per connection, and again after
 * Redis forgot it) instead of with every hit as the library's EVAL does.
 */
export class ThrottlerStorage extends ThrottlerStorageRedisService {
  private readonly runChain: (...args: (string | number)[]) => Promise<unknown>;

  constructor(redis: Redis) {
    super(redis);
    if (!(CHAIN_COMMAND in redis)) redis.defineCommand(CHAIN_COMMAND, { lua: CHAIN_SCRIPT });
    const chain = (redis as unknown as Record<string, (...args: (string | number)[]) => Promise<unknown>>)[CHAIN_COMMAND];
    this.runChain = chain.bind(redis);
  }

  /** Counts `counters` in order in one script call, stopping at the first refusal (see CHAIN_SCRIPT). */
  async incrementInOrder(counters: ChainedCounter[]): Promise<ChainedRecord[]> {
    const keys = counters.flatMap((c) => Object.values(throttlerKeys(c.key, c.name)));
    const argv = counters.flatMap((c) => [c.ttl, c.limit, c.blockDuration]);
    const results = await this.runChain(keys.length, ...keys, ...argv);
    if (!Array.isArray(results) || results.length !== 5 * counters.length || results.some((n) => typeof n !== 'number')) {
      throw new TypeError(`Unexpected throttler script result: ${JSON.stringify(results)}`);
    }
    const n = results as number[];
    return counters.map((_, i) => ({
      counted: n[5 * i + 4] === 1,
      totalHits: n[5 * i],
      timeToExpire: Math.ceil(n[5 * i + 1] / 1000),
      isBlocked: n[5 * i + 2] === 1,
      timeToBlockExpire: Math.ceil(n[5 * i + 3] / 1000),
    }));
  }

  override async increment(key: string, ttl: number, limit: number, blockDuration: number, throttlerName: string): Promise<ThrottlerRecord> {
    const [{ totalHits, timeToExpire, isBlocked, timeToBlockExpire }] = await this.incrementInOrder([{ key, name: throttlerName, ttl, limit, blockDuration }]);
    return { totalHits, timeToExpire, isBlocked, timeToBlockExpire };
  }
}
