import { createHmac } from 'crypto';
import { Transform } from 'class-transformer';
import { IsInt, IsOptional, IsString, Max, Min } from 'class-validator';
import { safeEqual } from '../crypto/tokens';
import { AppError } from '../errors/app-error';
import { UUID } from '../uuid';
import { ApiPropertyOptional } from '@nestjs/swagger';

/** Every list answers this shape (contract "Conventions"). */
export interface Page<T> {
  data: T[];
  pagination: { next_cursor: string | null; has_more: boolean };
}

/** the key new cursors are signed with first, then the earlier keys still accepted */
let cursorKeys: readonly Buffer[] = [Buffer.from('authp-cursor')];
/**
 * Called once at boot with the key derived from KEY_ENCRYPTION_KEY, so cursors cannot be forged;
 * or with the keys of every configured KEK, the current one first: new cursors are signed with
 * it, a cursor signed under an earlier one (issued before a rotation) is still accepted.
 */
export function setCursorKey(keys: Buffer | readonly Buffer[]): void {
  cursorKeys = Buffer.isBuffer(keys) ? [keys] : [...keys];
}

function mac(scope: string, payload: string, key = cursorKeys[0]): string {
  return createHmac('sha256', key).update(`${scope}\n${payload}`).digest('base64url').slice(0, 22);
}

/**
 * An opaque, tamper-evident cursor over a keyset position (e.g. [created_at, id]) of one list:
 * `scope` names the list and whose it is (e.g. `api_keys:<tenant id>`), and is bound into the
 * MAC, so a cursor is accepted only by the list that issued it.
 */
export function encodeCursor(position: (string | number)[], scope: string): string {
  const payload = Buffer.from(JSON.stringify(position)).toString('base64url');
  return `${payload}.${mac(scope, payload)}`;
}

/** The position of a cursor `encodeCursor` made for this `scope`; anything else is 400 request/invalid_cursor. */
export function decodeCursor(cursor: string, scope: string): (string | number)[] {
  const parts = cursor.split('.');
  const [payload, sig] = parts;
  // exactly payload.signature (anything appended is tampering too); byte-length safe: a signature
  // of non-ASCII characters is refused, not a timingSafeEqual RangeError
  const ok = parts.length === 2 && payload && sig && cursorKeys.some((key) => safeEqual(sig, mac(scope, payload, key)));
  if (!ok) throw new AppError('request/invalid_cursor');
  try {
    const value = JSON.parse(Buffer.from(payload, 'base64url').toString());
    if (!Array.isArray(value)) throw new Error('not an array');
    return value;
  } catch {
    throw new AppError('request/invalid_cursor');
  }
}

/**
 * The (sort key as text, id) position every list here pages by, from a cursor of list `scope`
 * (undefined without one); a cursor of another list or shape is 400 request/invalid_cursor.
 */
export function keysetPosition(cursor: string | undefined, scope: string): [string, string] | undefined {
  if (!cursor) return undefined;
  const pos = decodeCursor(cursor, scope);
  if (pos.length !== 2) throw new AppError('request/invalid_cursor');
  return sortPosition(pos);
}

/**
 * keysetPosition of a list ordered by a key that changes (the last action): the cursor also
 * carries the moment of the list's first page, which the list sorts as of, so an item whose key
 * moves while the list is walked keeps its place instead of jumping over the cursor.
 */
export function keysetPositionAsOf(cursor: string | undefined, scope: string): [string, string, string] | undefined {
  if (!cursor) return undefined;
  const pos = decodeCursor(cursor, scope);
  // a cursor of the two-element shape (issued before the list sorted as of its first page) goes on, as of now
  if (pos.length === 2) return [...sortPosition(pos), ''];
  if (pos.length !== 3 || typeof pos[2] !== 'string' || pos[2].length > 64) throw new AppError('request/invalid_cursor');
  return [...sortPosition(pos), pos[2]];
}

function sortPosition(pos: (string | number)[]): [string, string] {
  if (typeof pos[0] !== 'string' || pos[0].length > 64 || typeof pos[1] !== 'string' || !UUID.test(pos[1])) throw new AppError('request/invalid_cursor');
  return [pos[0], pos[1]];
}

/** Builds a page of list `scope` from `limit + 1` fetched rows. */
export function toPage<R, T>(rows: R[], limit: number, map: (r: R) => T, position: (r: R) => (string | number)[], scope: string): Page<T> {
  const has_more = rows.length > limit;
  const items = has_more ? rows.slice(0, limit) : rows;
  return {
    data: items.map(map),
    pagination: { next_cursor: has_more ? encodeCursor(position(items[items.length - 1]), scope) : null, has_more },
  };
}

/** A query-string integer for class-transformer: digits become a number, anything else stays as sent (and fails @IsInt). */
export const queryInt = ({ value }: { value: unknown }) => (value === undefined || value === '' ? undefined : /^\d+$/.test(String(value)) ? Number(value) : value);

export const CURSOR_DESCRIPTION = 'opaque: the next_cursor of the previous page of this same list (a cursor of another list, tenant or parent is 400 request/invalid_cursor)';

/** Query DTO base for cursor-paginated lists; subclasses narrow the limit range. */
export class CursorQuery {
  @ApiPropertyOptional({ description: CURSOR_DESCRIPTION }) @IsOptional() @IsString() cursor?: string;
  @ApiPropertyOptional({ type: 'integer', minimum: 1, maximum: 100, default: 20 }) @IsOptional() @Transform(queryInt) @IsInt() @Min(1) @Max(100) limit?: number;
}
