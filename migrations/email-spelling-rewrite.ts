import { QueryRunner } from 'typeorm';
// the key as normalizeEmail computes it since that migration (frozen there: a migration never imports src/)
import { emailKey } from './1765100000000-email-idn';

const PAGE = 1000;

/**
 * Rewrites the stored spelling of the addresses (`email`, the one mail goes to) in every table
 * that holds one beside its key, a page at a time: `respell` gives a row's new spelling (computed
 * in Node, as the code does), and a row is rewritten only when the spelling changes and its key
 * stays the key of the new spelling (a pair an earlier migration left for an operator keeps the
 * spelling that tells its accounts apart). `candidates` is the SQL filter of the rows that can change.
 */
export async function rewriteSpellings(q: QueryRunner, candidates: string, respell: (email: string) => string | undefined): Promise<void> {
  for (const table of ['users', 'dashboard_users', 'dashboard_invites']) {
    let after = '00000000-0000-0000-0000-000000000000';
    for (;;) {
      const rows: { id: string; email: string; email_normalized: string }[] = await q.query(
        `SELECT id, email, email_normalized FROM ${table} WHERE (${candidates}) AND id > $1 ORDER BY id LIMIT ${PAGE}`,
        [after],
      );
      if (!rows.length) break;
      after = rows[rows.length - 1].id;
      const changed = rows
        .map((r) => ({ ...r, spelling: respell(r.email) }))
        .filter((r): r is typeof r & { spelling: string } => r.spelling !== undefined && r.spelling !== r.email && emailKey(r.spelling) === r.email_normalized);
      if (changed.length) {
        await q.query(`UPDATE ${table} t SET email = v.email FROM unnest($1::uuid[], $2::text[]) AS v(id, email) WHERE t.id = v.id`, [
          changed.map((r) => r.id),
          changed.map((r) => r.spelling),
        ]);
      }
      if (rows.length < PAGE) break;
    }
  }
}
