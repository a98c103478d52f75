import { jobOptionsFor, MAIL_RETRY_STEPS_SECONDS, mailRetryDelayMs } from './outbox-job';

describe('mail retry schedule', () => {
  const attempts = jobOptionsFor('email').attempts!;

  it('retries quickly first, then hours apart, for at least 24 hours in all', () => {
    expect(mailRetryDelayMs(1, 0)).toBe(1000);
    expect(mailRetryDelayMs(2, 0)).toBe(5000);
    let span = 0;
    for (let n = 1; n < attempts; n++) span += mailRetryDelayMs(n, 0);
    expect(span).toBeGreaterThanOrEqual(24 * 3600 * 1000);
    expect(span).toBeLessThan(30 * 3600 * 1000);
  });

  it('jitters each delay by at most 10% upwards, and repeats the last step', () => {
    expect(mailRetryDelayMs(3, 0.999)).toBeLessThanOrEqual(33_000);
    expect(mailRetryDelayMs(3, 0.999)).toBeGreaterThan(30_000);
    const last = MAIL_RETRY_STEPS_SECONDS[MAIL_RETRY_STEPS_SECONDS.length - 1] * 1000;
    expect(mailRetryDelayMs(100, 0)).toBe(last);
  });

  it("the email topic uses it (BullMQ backoff type 'mail'); other topics keep the exponential default", () => {
    expect(jobOptionsFor('email')).toMatchObject({ attempts: MAIL_RETRY_STEPS_SECONDS.length + 1, backoff: { type: 'mail' } });
    expect(jobOptionsFor('webhook').backoff).toMatchObject({ type: 'exponential' });
  });
});
