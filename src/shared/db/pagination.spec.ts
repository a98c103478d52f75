import { decodeCursor, encodeCursor, keysetPosition, setCursorKey, toPage } from './pagination';

describe('cursor pagination', () => {
  beforeAll(() => setCursorKey(Buffer.alloc(32, 3)));
  const ID = '0b9e2a52-4f6e-4f55-9c1e-0f3a2d8b7c61';

  it('round-trips a position and refuses a tampered or foreign cursor', () => {
    const c = encodeCursor(['2026-01-01T00:00:00Z', 'abc'], 'list:a');
    expect(decodeCursor(c, 'list:a')).toEqual(['2026-01-01T00:00:00Z', 'abc']);
    const [payload, sig] = c.split('.');
    const forged = Buffer.from(JSON.stringify(['2030-01-01', 'zzz'])).toString('base64url');
    expect(() => decodeCursor(`${forged}.${sig}`, 'list:a')).toThrow();
    expect(() => decodeCursor(`${payload}.${'A'.repeat(22)}`, 'list:a')).toThrow();
    expect(() => decodeCursor('garbage', 'list:a')).toThrow();
    // a signature of 22 characters but more bytes (non-ASCII) is the same refusal, not a RangeError
    expect(() => decodeCursor(`${payload}.${'é'.repeat(22)}`, 'list:a')).toThrow(expect.objectContaining({ code: 'request/invalid_cursor' }));
    setCursorKey(Buffer.alloc(32, 4));
    expect(() => decodeCursor(c, 'list:a')).toThrow();
    setCursorKey(Buffer.alloc(32, 3));
  });

  it('a cursor is accepted only by the list (and owner) that issued it', () => {
    const c = encodeCursor(['2026-01-01 00:00:00+00', ID], 'api_keys:tenant-1');
    expect(keysetPosition(c, 'api_keys:tenant-1')).toEqual(['2026-01-01 00:00:00+00', ID]);
    for (const other of ['api_keys:tenant-2', 'webhooks:tenant-1', 'api_keys:tenant-1 ', '']) {
      expect(() => keysetPosition(c, other)).toThrow(expect.objectContaining({ code: 'request/invalid_cursor' }));
    }
  });

  it('keysetPosition: none without a cursor; a well-signed position of another shape is refused', () => {
    expect(keysetPosition(undefined, 's')).toBeUndefined();
    for (const bad of [['x'], ['2026-01-01', 'not-a-uuid'], [1, ID], ['x'.repeat(65), ID], ['a', ID, 'b']]) {
      expect(() => keysetPosition(encodeCursor(bad, 's'), 's')).toThrow(expect.objectContaining({ code: 'request/invalid_cursor' }));
    }
  });

  it('builds a page from limit + 1 rows, its cursor bound to the list', () => {
    const rows = [1, 2, 3].map((n) => ({ n }));
    const p = toPage(rows, 2, (r) => r.n, (r) => [r.n], 's');
    expect(p.data).toEqual([1, 2]);
    expect(p.pagination.has_more).toBe(true);
    expect(decodeCursor(p.pagination.next_cursor!, 's')).toEqual([2]);
    expect(() => decodeCursor(p.pagination.next_cursor!, 't')).toThrow();
    expect(toPage(rows, 3, (r) => r.n, (r) => [r.n], 's').pagination).toEqual({ next_cursor: null, has_more: false });
  });
});

describe('cursor keys across a KEY_ENCRYPTION_KEY rotation', () => {
  afterAll(() => setCursorKey(Buffer.alloc(32, 3)));

  it('a cursor signed under an earlier key is accepted while that key is configured; new cursors are signed under the current one', () => {
    const [oldKey, newKey] = [Buffer.alloc(32, 5), Buffer.alloc(32, 6)];
    setCursorKey(oldKey);
    const before = encodeCursor(['2026-01-01T00:00:00Z', 'abc'], 'list:a');
    setCursorKey([newKey, oldKey]);
    expect(decodeCursor(before, 'list:a')).toEqual(['2026-01-01T00:00:00Z', 'abc']);
    expect(() => decodeCursor(before, 'list:b')).toThrow();
    const after = encodeCursor(['x'], 'list:a');
    setCursorKey(newKey);
    expect(decodeCursor(after, 'list:a')).toEqual(['x']);
    expect(() => decodeCursor(before, 'list:a')).toThrow(expect.objectContaining({ code: 'request/invalid_cursor' }));
  });
});
