import { Logger } from '@nestjs/common';

/**
 * An 'error' listener for a Redis-backed client (ioredis, BullMQ queues and workers) that reports
 * an outage without flooding the log: one warning, then at most one per `quietMs` with how many
 * it held back. Without a listener BullMQ prints every reconnection failure as a raw stack.
 */
export function outageLog(log: Logger, what: string, quietMs = 60_000): (err: Error) => void {
  let last = -Infinity;
  let held = 0;
  return (err: Error) => {
    const now = Date.now();
    if (now - last < quietMs) {
      held++;
      return;
    }
    log.warn(`${what}: ${err.message}${held ? ` (${held} more since the last report)` : ''}`);
    last = now;
    held = 0;
  };
}
