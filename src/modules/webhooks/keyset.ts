import { decodeCursor } from '../../shared/db/pagination';
import { AppError } from '../../shared/errors/app-error';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The (created_at text, id) position of a list cursor; a cursor of another shape is 400. */
export function keysetPosition(cursor: string | undefined): [string, string] | undefined {
  if (!cursor) return undefined;
  const pos = decodeCursor(cursor);
  if (pos.length !== 2 || typeof pos[0] !== 'string' || typeof pos[1] !== 'string' || !UUID.test(pos[1]) || Number.isNaN(Date.parse(pos[0]))) {
    throw new AppError('request/invalid_cursor');
  }
  return [pos[0], pos[1]];
}
