import { decodeCursor, encodeCursor, setCursorKey, toPage } from './pagination';

describe('cursor pagination', () => {
  beforeAll(() => setCursorKey(Buffer.alloc(32, 3)));

  it('round-trips a position and refuses a tampered or foreign cursor', () => {
    const c = encodeCursor(['2026-01-01T00:00:00Z', 'abc']);
    expect(decodeCursor(c)).toEqual(['2026-01-01T00:00:00Z', 'abc']);
    const [payload, sig] = c.split('.');
    const forged = Buffer.from(JSON.stringify(['2030-01-01', 'zzz'])).toString('base64url');
    expect(() => decodeCursor(`${forged}.${sig}`)).toThrow();
    expect(() => decodeCursor(`${payload}.${'A'.repeat(22)}`)).toThrow();
    expect(() => decodeCursor('garbage')).toThrow();
    setCursorKey(Buffer.alloc(32, 4));
    expect(() => decodeCursor(c)).toThrow();
    setCursorKey(Buffer.alloc(32, 3));
  });

  it('builds a page from limit + 1 rows', () => {
    const rows = [1, 2, 3].map((n) => ({ n }));
    const p = toPage(rows, 2, (r) => r.n, (r) => [r.n]);
    expect(p.data).toEqual([1, 2]);
    expect(p.pagination.has_more).toBe(true);
    expect(decodeCursor(p.pagination.next_cursor!)).toEqual([2]);
    expect(toPage(rows, 3, (r) => r.n, (r) => [r.n]).pagination).toEqual({ next_cursor: null, has_more: false });
  });
});
