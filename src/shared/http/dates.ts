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

const FIRST_INSTANT = Date.parse('0001-01-01T00:00:00Z');
const LAST_SECOND = Date.parse('9999-12-31T23:59:59Z');

/**
 * An instant isInstant accepts, written in UTC (`YYYY-MM-DDTHH:MM:SS[.fraction]Z`, its fraction
 * digits kept): RFC 3339 allows offsets up to ±23:59, PostgreSQL reads only up to ±15:59. An
 * instant an offset moves out of years 1-9999 is clamped to that range's first or last instant,
 * which orders the same against every stored time.
 */
export function utcInstant(value: string): string {
  const m = RFC3339.exec(value);
  if (!m) throw new TypeError('not an RFC 3339 date-time');
  const offsetMinutes = m[7] === undefined ? 0 : (m[6].startsWith('-') ? -1 : 1) * (Number(m[7]) * 60 + Number(m[8]));
  const seconds = Date.parse(`${m[1]}T${m[2]}:${m[3]}:${m[4]}Z`) - offsetMinutes * 60_000;
  if (seconds < FIRST_INSTANT) return '0001-01-01T00:00:00Z';
  if (seconds > LAST_SECOND) return '9999-12-31T23:59:59.999999Z';
  return `${new Date(seconds).toISOString().slice(0, 19)}${m[5] ?? ''}Z`;
}

export const IsInstant = (options?: ValidationOptions): PropertyDecorator =>
  ValidateBy({ name: 'isInstant', validator: { validate: isInstant, defaultMessage: (a) => `${a?.property} must be an RFC 3339 date-time of a real instant (e.g. 2026-01-31T12:00:00Z)` } }, options);
