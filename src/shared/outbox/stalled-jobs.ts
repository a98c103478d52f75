import type { Logger } from '@nestjs/common';
import type { Job } from 'bullmq';

/**
 * How many times an outbox job may stall (its worker died or was killed mid-job, so its lock
 * expired) before BullMQ fails it. BullMQ's default is 1: two worker deaths in a row (a deploy,
 * then an OOM kill) would fail a mail for good. The webhook delivery worker uses 5 as well.
 */
export const OUTBOX_MAX_STALLED_COUNT = 5;

/** BullMQ's failedReason of a job that stalled more than maxStalledCount times. */
export const STALLED_FAILURE = 'job stalled more than allowable limit';

/** Whether a job failed because its workers died, not because its work failed. */
export function isStallFailure(err: Error | undefined | null): boolean {
  return !!err && err.message === STALLED_FAILURE;
}

/**
 * A job failed by stalling is not given up: it goes back to the queue (same id), as long as it
 * has attempts left (a job that keeps killing its worker ends after its attempts). Returns false
 * when it is out of attempts or the retry failed (Redis away): the queue reconciler then retries
 * it (redispatchUnsettled), since its outbox row stays unsettled.
 */
export async function requeueStalled(job: Job, log: Logger, what: string): Promise<boolean> {
  if (job.attemptsMade >= (job.opts.attempts ?? 1)) return false;
  try {
    await job.retry('failed');
    log.warn(`${what}: its workers died ${OUTBOX_MAX_STALLED_COUNT}+ times in a row; queued again (attempt ${job.attemptsMade})`);
    return true;
  } catch (e) {
    log.warn(`${what}: queueing it again after its workers died failed (the queue reconciler will): ${e instanceof Error ? e.message : e}`);
    return false;
  }
}
