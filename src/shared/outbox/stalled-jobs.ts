import type { Logger } from '@nestjs/common';
import { type Job, UnrecoverableError } from 'bullmq';
import type { OutboxJobData } from './outbox-job';

/**
 * How many times an outbox job may stall (its worker died or was killed mid-job, so its lock
 * expired) before BullMQ fails it. BullMQ's default is 1: two worker deaths in a row (a deploy,
 * then an OOM kill) would fail a mail for good. The webhook delivery worker uses 5 as well. A job
 * that stalls more than that is given up like any other final failure: it keeps killing its
 * workers (BullMQ keeps its stall count across a retry, so queueing it again would cost a worker
 * per attempt from then on).
 */
export const OUTBOX_MAX_STALLED_COUNT = 5;

/** BullMQ's failedReason of a job that stalled more than maxStalledCount times. */
export const STALLED_FAILURE = 'job stalled more than allowable limit';

/** Whether a job failed because its workers died, not because its work failed. */
export function isStallFailure(err: Error | undefined | null): boolean {
  return !!err && err.message === STALLED_FAILURE;
}

/**
 * The `failed` handler of an outbox consumer: logs the attempt and returns whether the job is
 * given up (out of attempts, unrecoverable, or stalled past OUTBOX_MAX_STALLED_COUNT, which
 * BullMQ fails as unrecoverable), in which case the caller settles its outbox row so the queue
 * reconciler does not queue it again.
 */
export function outboxJobFailed(job: Job<OutboxJobData>, err: Error, log: Logger, what: string): boolean {
  const stalled = isStallFailure(err);
  const final = stalled || err instanceof UnrecoverableError || err.name === 'UnrecoverableError' || job.attemptsMade >= (job.opts.attempts ?? 1);
  const why = stalled ? `its workers died more than ${OUTBOX_MAX_STALLED_COUNT} times in a row` : err.message;
  const line = `${what} (outbox ${job.data.outboxId}) attempt ${job.attemptsMade} failed${final ? ', giving up' : ''}: ${why}`;
  if (final) log.error(line);
  else log.warn(line);
  return final;
}
