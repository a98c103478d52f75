/**
 * Retry schedule of a webhook delivery: the delay after the n-th failed attempt is
 * BACKOFF_STEPS[n-1] x WEBHOOK_BACKOFF_BASE_MS (the last step repeats). With the defaults (base
 * 5 s, 15 attempts): 5 s, 30 s, 2 min, 5 min, 15 min, 30 min, 1 h, 2 h, 3 h, 4 h, 5 h, 6 h, 6 h,
 * 6 h; the last attempt is about 33.9 hours after the first (at least 24 hours, issue 4).
 */
export const BACKOFF_STEPS = [1, 6, 24, 60, 180, 360, 720, 1440, 2160, 2880, 3600, 4320] as const;

/** Delay before the next attempt after `failedAttempts` failures (1 = after the first). */
export function retryDelayMs(failedAttempts: number, baseMs: number): number {
  const i = Math.min(Math.max(failedAttempts, 1), BACKOFF_STEPS.length) - 1;
  return BACKOFF_STEPS[i] * baseMs;
}

/** Time from the first to the last of `attempts` attempts. */
export function retrySpanMs(attempts: number, baseMs: number): number {
  let total = 0;
  for (let n = 1; n < attempts; n++) total += retryDelayMs(n, baseMs);
  return total;
}
