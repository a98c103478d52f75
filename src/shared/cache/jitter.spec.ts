import { jittered } from './jitter';

describe('jittered lifetimes', () => {
  it('stays within [base - spread x base, base] and never below 1 for a positive base', () => {
    expect(jittered(120, 0.2, () => 0)).toBe(120);
    expect(jittered(120, 0.2, () => 0.999999)).toBe(97);
    expect(jittered(30_000, 0.2, () => 0.5)).toBe(27_000);
    expect(jittered(1, 0.2, () => 0.999999)).toBe(1);
    for (let i = 0; i < 1000; i++) {
      const t = jittered(60);
      expect(t).toBeGreaterThanOrEqual(48);
      expect(t).toBeLessThanOrEqual(60);
    }
  });

  it('spreads entries written in the same instant over the window', () => {
    const seen = new Set(Array.from({ length: 300 }, () => jittered(120)));
    expect(seen.size).toBeGreaterThan(15);
  });
});
