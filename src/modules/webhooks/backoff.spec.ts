import { retryDelayMs, retrySpanMs } from './backoff';

describe('webhook retry schedule', () => {
  it('is 5 s, 30 s, 2 min, 5 min, 15 min, 30 min, 1 h, 2 h, 3 h, 4 h, 5 h, 6 h, then 6 h with the default base', () => {
    const base = 5000;
    const s = Array.from({ length: 14 }, (_, i) => retryDelayMs(i + 1, base) / 1000);
    expect(s).toEqual([5, 30, 120, 300, 900, 1800, 3600, 7200, 10800, 14400, 18000, 21600, 21600, 21600]);
  });

  it('spans at least 24 hours with the default 15 attempts', () => {
    const span = retrySpanMs(15, 5000);
    expect(span).toBeGreaterThanOrEqual(24 * 3600 * 1000);
    expect(Math.round(span / 360000) / 10).toBe(33.9);
  });
});
