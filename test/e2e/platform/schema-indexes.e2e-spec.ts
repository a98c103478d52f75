import { createTestApp, TestApp } from '../../setup/app';

/**
 * Deleting a user (the guest purge deletes up to 1000 per tenant per run; a user's rows go by
 * cascade) looks up every row that references it. A foreign key without an index led by its
 * columns makes each of those lookups scan the whole referencing table, so a purge batch would
 * cost in proportion to every other user's rows.
 */
describe('schema: foreign keys to users and sessions are indexed', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(() => t.close());

  it('every foreign key referencing users or user_sessions has an index whose leading columns are its own', async () => {
    const keys = await t.db.query<{ tbl: string; name: string; indexed: boolean }>(
      `SELECT c.conrelid::regclass::text AS tbl, c.conname AS name,
              EXISTS (SELECT 1 FROM pg_index i
                       WHERE i.indrelid = c.conrelid
                         AND (i.indkey::int2[])[0:cardinality(c.conkey) - 1] @> c.conkey
                         AND (i.indkey::int2[])[0:cardinality(c.conkey) - 1] <@ c.conkey) AS indexed
         FROM pg_constraint c
        WHERE c.contype = 'f' AND c.confrelid IN ('users'::regclass, 'user_sessions'::regclass)
        ORDER BY 1, 2`,
    );
    expect(keys.length).toBeGreaterThanOrEqual(8); // sessions, refresh tokens, MFA, codes, tokens, revocations...
    expect(keys.filter((k) => !k.indexed)).toEqual([]);
  });
});
