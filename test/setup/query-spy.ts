import { Db } from '../../src/shared/db/db.service';

/**
 * The first parameter of every query named `name` that reaches PostgreSQL through `db` while
 * `run` runs (e.g. `api_key_resolve`: the key hashes looked up), in order.
 */
export async function namedQueryParams(db: Db, name: string, run: () => Promise<unknown>): Promise<string[]> {
  const query = db.query;
  const seen: string[] = [];
  db.query = function (this: Db, text: string, params?: unknown[], queryName?: string) {
    if (queryName === name) seen.push(String(params?.[0]));
    return query.call(this, text, params, queryName);
  } as Db['query'];
  try {
    await run();
  } finally {
    db.query = query;
  }
  return seen;
}
