import { Global, Inject, Logger, Module, OnApplicationShutdown } from '@nestjs/common';
import Redis, { RedisOptions } from 'ioredis';
import { APP_CONFIG, AppConfig, parseSentinels } from '../../config/config';
import { closeReplicaWriter, demandReplicas } from './exec-all';

export const REDIS = Symbol('REDIS');

const logger = new Logger('Redis');

export type RedisConnectionConfig = Pick<AppConfig, 'REDIS_URL'> & Partial<Pick<AppConfig, 'REDIS_SENTINELS' | 'REDIS_SENTINEL_MASTER' | 'REDIS_SENTINEL_PASSWORD'>>;

/**
 * Where and how every connection (the shared client, BullMQ's, the relay's, subscribers) reaches
 * Redis: REDIS_URL's host, credentials, database and TLS; or, with REDIS_SENTINELS, the primary of
 * REDIS_SENTINEL_MASTER as the sentinels name it, found again after a failover (the sentinels'
 * +switch-master, and a reconnection when a demoted primary answers READONLY), with REDIS_URL's
 * credentials, database and TLS.
 */
export function redisConnectionOptions(config: RedisConnectionConfig): RedisOptions {
  const url = new URL(config.REDIS_URL);
  const db = url.pathname.replace(/^\//, '');
  const common: RedisOptions = {
    username: url.username ? decodeURIComponent(url.username) : undefined,
    password: url.password ? decodeURIComponent(url.password) : undefined,
    db: db ? Number(db) : undefined,
    tls: url.protocol === 'rediss:' ? {} : undefined,
  };
  if (!config.REDIS_SENTINELS) return { ...common, host: url.hostname || '127.0.0.1', port: url.port ? Number(url.port) : 6379 };
  const sentinels = parseSentinels(config.REDIS_SENTINELS);
  if (typeof sentinels === 'string') throw new Error(sentinels);
  return {
    ...common,
    sentinels,
    name: config.REDIS_SENTINEL_MASTER,
    sentinelPassword: config.REDIS_SENTINEL_PASSWORD || undefined,
    enableTLSForSentinelMode: url.protocol === 'rediss:',
    failoverDetector: true,
    sentinelRetryStrategy: (times) => Math.min(times * 50, 250),
    // a demoted primary refuses writes (READONLY) until the connection moves: reconnect and resend
    reconnectOnError: (err) => (err.message.startsWith('READONLY') ? 2 : false),
  };
}

/**
 * Refuses to start on a REDIS_URL database the server does not have (redis://host/99 on a Redis
 * with 16). ioredis, and so every BullMQ connection, reports the refused SELECT and carries on in
 * database 0, beside another application's keys; the shared client closes itself on it (below),
 * but the queue connections cannot (a BullMQ queue writes its meta key as it is built). Checked by
 * createApiApp and startWorker before Nest builds anything. An unreachable Redis is left to the
 * clients; the answer says so (its connection error, else undefined), for a caller that waits for
 * it to say it does.
 */
export async function assertRedisDatabase(config: RedisConnectionConfig): Promise<{ unreachable?: string; where: string }> {
  const options = redisConnectionOptions(config);
  const probe = new Redis({
    ...options,
    db: 0,
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    connectTimeout: 2000,
    commandTimeout: 2000,
    retryStrategy: () => null,
    sentinelRetryStrategy: () => null,
  });
  // connect() rejects with "Connection is closed."; the cause (ECONNREFUSED, ...) is the error event's
  let cause: Error | undefined;
  probe.on('error', (e: Error) => (cause ??= e));
  const where = config.REDIS_SENTINELS ? `the primary of ${config.REDIS_SENTINEL_MASTER ?? ''}` : `${probe.options.host ?? ''}:${probe.options.port ?? ''}`;
  try {
    await probe.connect();
  } catch (err) {
    probe.disconnect();
    return { unreachable: (cause ?? (err as Error)).message, where };
  }
  try {
    if (options.db) await probe.select(options.db);
  } catch (err) {
    if (/DB index is out of range/i.test((err as Error).message)) {
      throw new Error(`cannot start: Redis at ${where} has no database ${options.db} (REDIS_URL): ${(err as Error).message}`);
    }
  } finally {
    probe.disconnect();
  }
  return { where };
}

/** The clients createRedis opens while a boot runs (see closeRedisIfBootFails). */
let opening: Redis[] | undefined;

/**
 * Runs a boot (Nest building the providers); if it fails, disconnects the Redis clients createRedis
 * opened meanwhile. Nest hands back no half-built application to close, and an open client keeps
 * the process alive: a test of a refused start, or the CLI reporting it, would never exit.
 */
export async function closeRedisIfBootFails<T>(boot: () => Promise<T>): Promise<T> {
  const outer = opening;
  const mine: Redis[] = (opening = []);
  try {
    return await boot();
  } catch (err) {
    for (const c of mine) c.disconnect();
    throw err;
  } finally {
    opening = outer;
  }
}

/** One ioredis client per process; every key carries REDIS_KEY_PREFIX. */
export function createRedis(
  config: RedisConnectionConfig & Pick<AppConfig, 'REDIS_KEY_PREFIX'> & Partial<Pick<AppConfig, 'REDIS_COMMAND_TIMEOUT_MS' | 'REDIS_REVOCATION_REPLICAS' | 'REDIS_REVOCATION_WAIT_MS'>>,
  extra: { maxRetriesPerRequest?: number | null } = {},
): Redis {
  const client = new Redis({
    ...redisConnectionOptions(config),
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
  opening?.push(client);
  // revocations and cache invalidations (writeElseDelete) wait for the replicas asked for
  demandReplicas(client, config.REDIS_REVOCATION_REPLICAS ?? 0, config.REDIS_REVOCATION_WAIT_MS ?? 500);
  // connection errors are expected while Redis is away: one warning per outage, not ioredis'
  // unstructured "Unhandled error event" for every reconnection attempt
  let failing = false;
  client.on('error', (err: Error) => {
    // ioredis carries on in database 0 when REDIS_URL's database does not exist (SELECT refused):
    // keys would land beside another application's and /ready would say all is well. Closed for
    // good instead: every command fails (503) and /ready fails until the operator fixes REDIS_URL
    if (/DB index is out of range/i.test(err.message)) {
      logger.error(`Redis has no database ${String(client.options.db)} (REDIS_URL): ${err.message}; not using it`);
      client.disconnect();
      return;
    }
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

/**
 * Closes a client after the commands sent before (QUIT), then its connector: with
 * REDIS_SENTINELS, ioredis' QUIT leaves the failover detector's connections to the sentinels
 * open (only disconnect() cleans them up), and they reconnect every 60 s after the sentinels go.
 */
export async function quitRedis(client: Redis): Promise<void> {
  await closeReplicaWriter(client);
  await client.quit().catch(() => undefined);
  client.disconnect();
}

class RedisCloser implements OnApplicationShutdown {
  constructor(@Inject(REDIS) private readonly redis: Redis) {}
  async onApplicationShutdown(): Promise<void> {
    await quitRedis(this.redis);
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
