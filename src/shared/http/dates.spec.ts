import { isCalendarDate, isInstant } from './dates';

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
});
