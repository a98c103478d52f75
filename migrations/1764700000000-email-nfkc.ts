import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Frozen copy of normalizeEmail as of this migration (a migration never imports src/: the helper
 * may change later, this migration must not): trim, NFKC, trim, toLowerCase, final sigma ς to σ,
 * NFKC. Computed in Node, not in SQL (PostgreSQL lower() depends on the database's locale).
 */
function emailKey(email: string): string {
  return email.trim().normalize('NFKC').trim().toLowerCase().replace(/\u03c2/g, '\u03c3').normalize('NFKC');
}

const PAGE = 1000;

interface Row {
  id: string;
  scope: string;
  key: string;
}

/**
 * Emails are now compared by an NFKC, case-folded key (normalizeEmail): canonical (josé in NFC or
 * NFD), compatibility (fullwidth ｊｏｈｎ, the ligature ﬁ) and final-sigma (ΣΑΣ, σας, σασ)
 * spellings are one address. Stored keys are rewritten to the new key, so the same address typed
 * any of those ways finds the existing account. Only keys with a non-ASCII character can change
 * (an ASCII key is its own new key). The new key is computed from the stored key: for every
 * spelling, the new key of its old key (trim + lower-case, or the NFC key of the unreleased
 * previous version) is its new key.
 *
 * A key is left as it is when its new key is already another account's key, or when two rows
 * would be rewritten to the same key (two accounts created apart before; a migration cannot merge
 * accounts), so the unique indexes stay intact. Every spelling now reaches the account holding the
 * new key, so the one left cannot sign in by email until an operator resolves the pair (README:
 * the query that lists them). Pending invitations (no uniqueness) are all rewritten. Short-lived
 * codes and tokens are left to expire.
 */
export class EmailNfkc1764700000000 implements MigrationInterface {
  name = 'EmailNfkc1764700000000';

  async up(q: QueryRunner): Promise<void> {
    // end users: unique per tenant
    await rewrite(q, 'users', true, true);
    // dashboard accounts: unique over the platform
    await rewrite(q, 'dashboard_users', false, true);
    // pending invitations: no uniqueness
    await rewrite(q, 'dashboard_invites', false, false);
  }

  async down(): Promise<void> {
    // forward-only: the new keys are keys the previous code can still compare against
  }
}

/** The uniqueness scope of a row of `t`: its tenant, or the whole table. */
const scopeOf = (perTenant: boolean) => (perTenant ? 't.tenant_id::text' : `''`);

/** Rows of `table` whose key changes under emailKey: id, uniqueness scope, new key. */
async function changedKeys(q: QueryRunner, table: string, perTenant: boolean): Promise<Row[]> {
  const out: Row[] = [];
  let after = '00000000-0000-0000-0000-000000000000';
  for (;;) {
    const page: { id: string; scope: string; email_normalized: string }[] = await q.query(
      `SELECT t.id, ${scopeOf(perTenant)} AS scope, t.email_normalized FROM ${table} t
        WHERE t.email_normalized ~ '[^\\x01-\\x7F]' AND t.id > $1 ORDER BY t.id LIMIT ${PAGE}`,
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

async function rewrite(q: QueryRunner, table: string, perTenant: boolean, unique: boolean): Promise<void> {
  let rows = await changedKeys(q, table, perTenant);
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
  }
  for (let i = 0; i < rows.length; i += PAGE) {
    const chunk = rows.slice(i, i + PAGE);
    await q.query(
      `UPDATE ${table} t SET email_normalized = v.key FROM unnest($1::uuid[], $2::text[]) AS v(id, key) WHERE t.id = v.id`,
      [chunk.map((r) => r.id), chunk.map((r) => r.key)],
    );
  }
}
