import { QueryRunner } from 'typeorm';

const PAGE = 1000;

interface Row {
  id: string;
  scope: string;
  key: string;
}

/** The uniqueness scope of a row of `t`: its tenant, or the whole table. */
const scopeOf = (perTenant: boolean) => (perTenant ? 't.tenant_id::text' : `''`);

/** Rows of `table` whose key changes under emailKey: id, uniqueness scope, new key. */
async function changedKeys(q: QueryRunner, table: string, perTenant: boolean, emailKey: (key: string) => string, candidates: string): Promise<Row[]> {
  const out: Row[] = [];
  let after = '00000000-0000-0000-0000-000000000000';
  for (;;) {
    const page: { id: string; scope: string; email_normalized: string }[] = await q.query(
      `SELECT t.id, ${scopeOf(perTenant)} AS scope, t.email_normalized FROM ${table} t
        WHERE (${candidates}) AND t.id > $1 ORDER BY t.id LIMIT ${PAGE}`,
      [after],
    );
    for (const r of page) {
      const key = emailKey(r.email_normalized);
      if (key !== r.email_normalized) out.push({ id: r.id, scope: r.scope, key });
    }
    if (page.length < PAGE) return out;
    after = page[page.length - 1].id;
  }
}

/**
 * Rewrites the stored email comparison keys (email_normalized) of `table` to `emailKey` of each,
 * for the migrations that change the key (a migration never imports src/: each passes its own
 * frozen copy of the key function). Only rows matching `candidates` (an SQL condition on `t`) can
 * change. A key is left as it is when its new key is already another row's key, or when two rows
 * would be rewritten to the same key (a migration cannot merge accounts), so unique indexes stay
 * intact; such pairs are resolved by an operator (README).
 */
export async function rewriteEmailKeys(q: QueryRunner, table: string, perTenant: boolean, unique: boolean, emailKey: (key: string) => string, candidates: string): Promise<void> {
  let rows = await changedKeys(q, table, perTenant, emailKey, candidates);
  const found = rows;
  if (unique) {
    // two rows rewritten to one key: neither is
    const count = new Map<string, number>();
    for (const r of rows) count.set(`${r.scope}\n${r.key}`, (count.get(`${r.scope}\n${r.key}`) ?? 0) + 1);
    rows = rows.filter((r) => count.get(`${r.scope}\n${r.key}`) === 1);
    // the new key already belongs to another row (which keeps it: a new key is its own new key)
    const taken = new Set<string>();
    for (let i = 0; i < rows.length; i += PAGE) {
      const chunk = rows.slice(i, i + PAGE);
      const hits: { scope: string; key: string }[] = await q.query(
        `SELECT ${scopeOf(perTenant)} AS scope, t.email_normalized AS key
           FROM ${table} t JOIN unnest($1::text[], $2::text[]) AS k(scope, key)
             ON ${perTenant ? 't.tenant_id = k.scope::uuid AND ' : ''}t.email_normalized = k.key`,
        [chunk.map((r) => r.scope), chunk.map((r) => r.key)],
      );
      for (const h of hits) taken.add(`${h.scope}\n${h.key}`);
    }
    rows = rows.filter((r) => !taken.has(`${r.scope}\n${r.key}`));
    // the rows left with their old key, for the operator (README: resolve the pairs by hand)
    const kept = new Set(rows.map((r) => r.id));
    const skipped = found.filter((r) => !kept.has(r.id));
    if (skipped.length) console.warn(`${table}: ${skipped.length} email key(s) kept as they were (another row has, or would get, the new key): ${skipped.map((r) => r.id).join(', ')}`);
  }
  for (let i = 0; i < rows.length; i += PAGE) {
    const chunk = rows.slice(i, i + PAGE);
    await q.query(
      `UPDATE ${table} t SET email_normalized = v.key FROM unnest($1::uuid[], $2::text[]) AS v(id, key) WHERE t.id = v.id`,
      [chunk.map((r) => r.id), chunk.map((r) => r.key)],
    );
  }
}
