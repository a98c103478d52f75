import { Inject, Injectable } from '@nestjs/common';
import Redis from 'ioredis';
import { REDIS } from '../redis/redis.module';

/** BullMQ's lowest priority (its highest priority number). */
export const MAX_JOB_PRIORITY = 2_097_151;

/** A tenant that queued nothing for this long starts again at priority 1. */
export const FAIR_SHARE_IDLE_SECONDS = 120;

/**
 * Fair share of a queue between tenants (mail, webhook fan-out and deliveries): BullMQ priorities
 * that interleave them. A tenant's k-th job since it was last idle (FAIR_SHARE_IDLE_SECONDS with
 * nothing queued) gets priority k, and BullMQ takes lower numbers first (FIFO among equals), so
 * the queue serves every tenant's first job, then every tenant's second, and so on: round robin.
 * One tenant's burst of 1,000 mails (a launch, a morning sign-in rush) no longer stands ahead of
 * another tenant's password-reset mail, which, as that tenant's first, goes out after at most
 * one job of each other tenant; a tenant's own jobs keep their order (its counter only grows
 * while it is busy). A job retried or postponed (a webhook waiting for its tenant's slot) comes
 * back with its priority. Mails of no tenant (dashboard accounts) share one counter.
 */
@Injectable()
export class FairShare {
  constructor(@Inject(REDIS) private readonly redis: Redis) {}

  /** One priority per job of `tenantIds` (in order) for `queue`; one Redis round trip. */
  async priorities(queue: string, tenantIds: readonly (string | null | undefined)[]): Promise<number[]> {
    if (!tenantIds.length) return [];
    const keyOf = (t: string | null | undefined) => `fair:${queue}:${t ?? 'platform'}`;
    const counts = new Map<string, number>();
    for (const t of tenantIds) counts.set(keyOf(t), (counts.get(keyOf(t)) ?? 0) + 1);
    const keys = [...counts.keys()];
    const pipe = this.redis.multi();
    for (const k of keys) pipe.incrby(k, counts.get(k)!).expire(k, FAIR_SHARE_IDLE_SECONDS);
    const replies = (await pipe.exec()) ?? [];
    const next = new Map<string, number>();
    keys.forEach((k, i) => {
      const [err, last] = replies[2 * i] ?? [new Error('no reply')];
      if (err) throw err;
      next.set(k, Number(last) - counts.get(k)! + 1);
    });
    return tenantIds.map((t) => {
      const k = keyOf(t);
      const p = next.get(k)!;
      next.set(k, p + 1);
      return Math.min(Math.max(1, p), MAX_JOB_PRIORITY);
    });
  }
}
