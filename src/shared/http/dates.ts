import { ValidateBy, ValidationOptions } from 'class-validator';

/** Whether YYYY-MM-DD names a day of the calendar (no 30 February): it survives a round trip through Date. */
export function isCalendarDate(value: string): boolean {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(value)) return false;
  const d = new Date(`${value}T00:00:00Z`);
  return !Number.isNaN(d.getTime()) && d.toISOString().slice(0, 10) === value;
}

// RFC 3339 section 5.6 (a space may stand for the T, as its note allows; any number of fraction digits)
const RFC3339 = /^(\d{4}-\d{2}-\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-](\d{2}):(\d{2}))$/;

/** An RFC 3339 date-time that names a real instant: a calendar date, hours, minutes and seconds (and offset) in range, year 1 to 9999. */
export function isInstant(value: unknown): boolean {
  const m = typeof value === 'string' ? RFC3339.exec(value) : null;
  if (!m || m[1].startsWith('0000') || !isCalendarDate(m[1])) return false;
  const [h, mi, s] = m.slice(2, 5).map(Number);
  const offsetOk = m[7] === undefined || (Number(m[7]) <= 23 && Number(m[8]) <= 59);
  return h <= 23 && mi <= 59 && s <= 59 && offsetOk;
}

export const IsInstant = (options?: ValidationOptions): PropertyDecorator =>
  ValidateBy({ name: 'isInstant', validator: { validate: isInstant, defaultMessage: (a) => `${a?.property} must be an RFC 3339 date-time of a real instant (e.g. 2026-01-31T12:00:00Z)` } }, options);
