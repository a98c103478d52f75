import { isCalendarDate, isInstant, utcInstant } from './dates';

describe('dates', () => {
  it('isCalendarDate: a day the calendar has', () => {
    for (const d of ['2024-02-29', '2026-12-31', '0004-02-29', '1900-01-01']) expect(isCalendarDate(d)).toBe(true);
    for (const d of ['2026-02-29', '2026-04-31', '2026-13-01', '2026-00-10', '2026-01-00', '1900-02-29', '2026-1-01', 'x']) expect(isCalendarDate(d)).toBe(false);
  });

  it('isInstant: an RFC 3339 date-time of a real instant', () => {
    for (const v of ['2024-02-29T23:59:59Z', '2026-01-01 00:00:00.1234567890Z', '2026-01-01t10:00:00-23:59', '9999-12-31T23:59:59+00:00']) expect(isInstant(v)).toBe(true);
    for (const v of ['2026-02-30T00:00:00Z', '0000-01-01T00:00:00Z', '2026-01-01T24:00:00Z', '2026-01-01T10:60:00Z', '2026-01-01T10:00:60Z', '2026-01-01T10:00:00+24:00', '2026-01-01T10:00:00', 'yesterday', 5]) {
      expect(isInstant(v)).toBe(false);
    }
  });

  it('utcInstant: the same instant in UTC, fraction digits kept, clamped to years 1-9999', () => {
    expect(utcInstant('2026-01-01T16:10:00+16:00')).toBe('2026-01-01T00:10:00Z');
    expect(utcInstant('2025-12-31t05:40:00.1234567-18:30')).toBe('2026-01-01T00:10:00.1234567Z');
    expect(utcInstant('2024-02-29 23:59:59z')).toBe('2024-02-29T23:59:59Z');
    expect(utcInstant('2026-03-01T00:30:00+01:00')).toBe('2026-02-28T23:30:00Z');
    expect(utcInstant('0001-01-01T00:00:00+00:01')).toBe('0001-01-01T00:00:00Z');
    expect(utcInstant('0001-01-01T10:00:00+16:00')).toBe('0001-01-01T00:00:00Z');
    expect(utcInstant('9999-12-31T23:59:59-23:59')).toBe('9999-12-31T23:59:59.999999Z');
    expect(utcInstant('9999-12-31T23:59:59.5Z')).toBe('9999-12-31T23:59:59.5Z');
    expect(() => utcInstant('yesterday')).toThrow(TypeError);
  });
});
