import { MigrationInterface, QueryRunner } from 'typeorm';
// the key as normalizeEmail computes it since that migration (frozen there: a migration never imports src/)
import { emailKey } from './1765100000000-email-idn';

const PAGE = 1000;

/**
 * The spelling of an address stored beside its key (the one mail goes to) is now kept in NFKC,
 * as new accounts store it (mailboxSpelling): an account created with a compatibility spelling
 * (fullwidth `ｖｉｃｔｉｍ@example.com`, whose key is `victim@example.com`) had every mail of the
 * account (verification, reset, links, codes) go to that other mailbox, so the owner of the
 * address the key names could not take it over by a reset. Rows are rewritten to their NFKC
 * spelling (computed in Node, as the code does), a page at a time; keys do not change. Only
 * non-ASCII spellings can change. Left as they are: a row whose key is not the key of its new
 * spelling (a pair the earlier email migrations left for an operator to resolve keeps the
 * spelling that tells its accounts apart), and a spelling whose NFKC form is no longer one address
 * (a fullwidth `＠` or a space would appear). Profile caches (at most USER_CACHE_TTL_SECONDS) may
 * show the old spelling until they expire; mail queued before keeps its address.
 */
export class EmailNfkcSpelling1765200000000 implements MigrationInterface {
  name = 'EmailNfkcSpelling1765200000000';

  async up(q: QueryRunner): Promise<void> {
    for (const table of ['users', 'dashboard_users', 'dashboard_invites']) {
      let after = '00000000-0000-0000-0000-000000000000';
      for (;;) {
        const rows: { id: string; email: string; email_normalized: string }[] = await q.query(
          `SELECT id, email, email_normalized FROM ${table} WHERE email ~ '[^\\x01-\\x7F]' AND id > $1 ORDER BY id LIMIT ${PAGE}`,
          [after],
        );
        if (!rows.length) break;
        after = rows[rows.length - 1].id;
        const changed = rows
          .map((r) => ({ ...r, spelling: r.email.normalize('NFKC') }))
          .filter((r) => r.spelling !== r.email && r.spelling.split('@').length === r.email.split('@').length && !/\s/u.test(r.spelling) && emailKey(r.spelling) === r.email_normalized);
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

  async down(): Promise<void> {
    // forward-only: the previous code reads NFKC spellings as any other
  }
}
