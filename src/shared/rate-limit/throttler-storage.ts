import { ThrottlerStorageRedisService } from '@nest-lab/throttler-storage-redis';
import Redis from 'ioredis';

type ThrottlerRecord = Awaited<ReturnType<ThrottlerStorageRedisService['increment']>>;
type ScriptRunner = (hitKey: string, blockKey: string, name: string, ttl: number, limit: number, blockDuration: number) => Promise<unknown>;

const COMMAND = 'authpThrottlerIncrement';
const CHAIN_COMMAND = 'authpThrottlerIncrementChain';

/**
 * Several counters in declared order, in one script call: each counted as the library's script
 * counts one (same keys, fixed window, block for blockDuration), until one refuses; the counters
 * after a refusal are not counted, only their running block (if any) is read. KEYS: hits and
 * blocked key of each counter; ARGV: ttl, limit, blockDuration of each. Answers 4 numbers per
 * counter: totalHits (0: not counted), timeToExpire, isBlocked, timeToBlockExpire (ms).
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
  if refused then
    local b = redis.call('PTTL', blockKey)
    if b > 0 then
      table.insert(out, 0); table.insert(out, 0); table.insert(out, 1); table.insert(out, b)
    else
      table.insert(out, 0); table.insert(out, 0); table.insert(out, 0); table.insert(out, 0)
    end
  else
    local totalHits = redis.call('INCR', hitKey)
    local timeToExpire = redis.call('PTTL', hitKey)
    if timeToExpire <= 0 then
      redis.call('PEXPIRE', hitKey, ttl)
      timeToExpire = ttl
    end
    local isBlocked = redis.call('GET', blockKey)
    local timeToBlockExpire = 0
    if isBlocked then
      timeToBlockExpire = redis.call('PTTL', blockKey)
    elseif totalHits > limit then
      redis.call('SET', blockKey, 1, 'PX', blockDuration)
      isBlocked = '1'
      timeToBlockExpire = blockDuration
    end
    if isBlocked and timeToBlockExpire <= 0 then
      redis.call('DEL', blockKey)
      redis.call('SET', hitKey, 1, 'PX', ttl)
      totalHits = 1
      timeToExpire = ttl
      isBlocked = false
    end
    if isBlocked then refused = true end
    table.insert(out, totalHits); table.insert(out, timeToExpire); table.insert(out, isBlocked and 1 or 0); table.insert(out, timeToBlockExpire)
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

/** The answer for one counter of `incrementInOrder`; `counted` false: an earlier counter refused. */
export type ChainedRecord = ThrottlerRecord & { counted: boolean };

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
  private readonly runChain: (...args: (string | number)[]) => Promise<unknown>;

  constructor(redis: Redis) {
    super(redis);
    if (!(COMMAND in redis)) redis.defineCommand(COMMAND, { numberOfKeys: 2, lua: this.scriptSrc });
    const fn = (redis as unknown as Record<string, ScriptRunner>)[COMMAND];
    this.run = fn.bind(redis);
    if (!(CHAIN_COMMAND in redis)) redis.defineCommand(CHAIN_COMMAND, { lua: CHAIN_SCRIPT });
    const chain = (redis as unknown as Record<string, (...args: (string | number)[]) => Promise<unknown>>)[CHAIN_COMMAND];
    this.runChain = chain.bind(redis);
  }

  /** Counts `counters` in order in one script call, stopping at the first refusal (see CHAIN_SCRIPT). */
  async incrementInOrder(counters: ChainedCounter[]): Promise<ChainedRecord[]> {
    const keys = counters.flatMap((c) => Object.values(throttlerKeys(c.key, c.name)));
    const argv = counters.flatMap((c) => [c.ttl, c.limit, c.blockDuration]);
    const results = await this.runChain(keys.length, ...keys, ...argv);
    if (!Array.isArray(results) || results.length !== 4 * counters.length || results.some((n) => typeof n !== 'number')) {
      throw new TypeError(`Unexpected throttler script result: ${JSON.stringify(results)}`);
    }
    const n = results as number[];
    return counters.map((_, i) => ({
      counted: n[4 * i] > 0,
      totalHits: n[4 * i],
      timeToExpire: Math.ceil(n[4 * i + 1] / 1000),
      isBlocked: n[4 * i + 2] === 1,
      timeToBlockExpire: Math.ceil(n[4 * i + 3] / 1000),
    }));
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
