import { Inject, Injectable } from '@nestjs/common';
import Redis from 'ioredis';
import { APP_CONFIG, AppConfig } from '../../../config/config';
import { REDIS } from '../../../shared/redis/redis.module';

/**
 * Takes a slot for a delivery job when its tenant holds fewer than the cap (or the job holds one
 * already, then renewed). Slots are members of a sorted set scored by their expiry, so a slot of a
 * worker that died frees itself. KEYS: the tenant's set. ARGV: now, expiry, job id, cap, set TTL (ms).
 */
const TAKE_SCRIPT = `
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if not redis.call('ZSCORE', KEYS[1], ARGV[3]) and redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[4]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return 1`;
const TAKE_COMMAND = 'authpWebhookTenantSlot';
type Take = (key: string, now: number, expiry: number, member: string, cap: number, ttlMs: number) => Promise<number>;

/**
 * Deliveries one tenant may have in flight at once, over every worker (WEBHOOK_CONCURRENCY_PER_TENANT):
 * one tenant's slow or silent endpoints, each attempt holding its slot for up to WEBHOOK_TIMEOUT_MS,
 * cannot take every worker slot and hold up the other tenants' webhooks. Redis unreachable: the
 * slot is granted (BullMQ, on the same Redis, is not working either).
 */
@Injectable()
export class WebhookTenantSlots {
  private readonly take: Take;

  constructor(
    @Inject(REDIS) private readonly redis: Redis,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {
    if (!(TAKE_COMMAND in redis)) redis.defineCommand(TAKE_COMMAND, { numberOfKeys: 1, lua: TAKE_SCRIPT });
    this.take = (redis as unknown as Record<string, Take>)[TAKE_COMMAND].bind(redis);
  }

  /** Whether the job may run now; when it may, `release` it once its attempt is over. */
  async acquire(tenantId: string, jobId: string): Promise<boolean> {
    const now = Date.now();
    // held as long as an attempt can run (its lock, or its timeout and a margin when longer): a
    // worker that dies frees it then
    const holdMs = Math.max(this.config.WEBHOOK_LOCK_MS, this.config.WEBHOOK_TIMEOUT_MS + 5_000);
    try {
      return (await this.take(this.key(tenantId), now, now + holdMs, jobId, this.config.WEBHOOK_CONCURRENCY_PER_TENANT, holdMs * 2)) === 1;
    } catch {
      return true;
    }
  }

  async release(tenantId: string, jobId: string): Promise<void> {
    await this.redis.zrem(this.key(tenantId), jobId).catch(() => undefined);
  }

  private key(tenantId: string): string {
    return `webhook-slots:${tenantId}`;
  }
}
