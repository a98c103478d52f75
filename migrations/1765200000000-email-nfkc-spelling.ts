import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The spelling of an address stored beside its key (the one mail goes to) is now kept in NFKC,
 * as new accounts store it (mailboxSpelling): an account created with a compatibility spelling
 * (fullwidth `ｖｉｃｔｉｍ@example.com`, whose key is `victim@example.com`) had every mail of the
 * account (verification, reset, links, codes) go to that other mailbox, so the owner of the
 * address the key names could not take it over by a reset. Existing rows are rewritten to their
 * NFKC spelling (computed in Node, as the code does); keys do not change (normalizeEmail starts
 * with NFKC). Only non-ASCII spellings can change. A spelling whose NFKC form is no longer one
 * address (a fullwidth `＠` or a space would appear) is left as it is. Profile caches (at most
 * USER_CACHE_TTL_SECONDS) may show the old spelling until they expire.
 */
export class EmailNfkcSpelling1765200000000 implements MigrationInterface {
  name = 'EmailNfkcSpelling1765200000000';

  async up(q: QueryRunner): Promise<void> {
    for (const table of ['users', 'dashboard_users', 'dashboard_invites']) {
      const rows: { id: string; email: string }[] = await q.query(`SELECT id, email FROM ${table} WHERE email ~ '[^\\x01-\\x7F]'`);
      const changed = rows
        .map((r) => ({ id: r.id, email: r.email.normalize('NFKC') }))
        .filter((r, i) => r.email !== rows[i].email && r.email.split('@').length === rows[i].email.split('@').length && !/\s/u.test(r.email));
      if (!changed.length) continue;
      await q.query(`UPDATE ${table} t SET email = v.email FROM unnest($1::uuid[], $2::text[]) AS v(id, email) WHERE t.id = v.id`, [
        changed.map((r) => r.id),
        changed.map((r) => r.email),
      ]);
    }
  }

  async down(): Promise<void> {
    // forward-only: the previous code reads NFKC spellings as any other
  }
}
