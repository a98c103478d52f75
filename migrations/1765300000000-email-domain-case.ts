import { MigrationInterface, QueryRunner } from 'typeorm';
import { domainToASCII, domainToUnicode } from 'url';
// the key as normalizeEmail computes it since that migration (frozen there: a migration never imports src/)
import { emailKey } from './1765100000000-email-idn';

const PAGE = 1000;

/**
 * A stored spelling whose domain reaches another DNS name once lower-cased (a capital ẞ, which
 * IDNA maps to `ss` but mail software lower-cases to ß; a capital Σ ending the name, σ for IDNA, ς
 * in lower case) had its mail go to another domain than the one its key names: `kim@busineẞ.com`
 * holds the key of kim@business.com, but its mail went to busineß.com. Such addresses are refused
 * now; stored ones take their key's domain (`kim@business.com`), so the account's mail reaches the
 * mailbox the key names and its owner can take it over by a reset. Keys do not change; a row whose
 * key would is left for an operator. Pages of rows with a non-ASCII character, computed in Node.
 */
export class EmailDomainCase1765300000000 implements MigrationInterface {
  name = 'EmailDomainCase1765300000000';

  async up(q: QueryRunner): Promise<void> {
    for (const table of ['users', 'dashboard_users', 'dashboard_invites']) {
      let after = '00000000-0000-0000-0000-000000000000';
      for (;;) {
        const rows: { id: string; email: string; email_normalized: string }[] = await q.query(
          `SELECT id, email, email_normalized FROM ${table} WHERE email ~ '@.*[^\\x01-\\x7F]' AND id > $1 ORDER BY id LIMIT ${PAGE}`,
          [after],
        );
        if (!rows.length) break;
        after = rows[rows.length - 1].id;
        const changed = rows.map((r) => ({ ...r, spelling: keyDomainSpelling(r.email) })).filter((r) => r.spelling !== r.email && emailKey(r.spelling) === r.email_normalized);
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
    // forward-only: the previous code reads these spellings as any other
  }
}

/** The address with its domain in the IDNA Unicode form of the domain as stored, when lower-casing would reach another name. */
function keyDomainSpelling(email: string): string {
  const at = email.lastIndexOf('@');
  const domain = email.slice(at + 1);
  const ascii = domainToASCII(domain);
  if (!ascii || ascii === domainToASCII(domain.toLowerCase())) return email;
  return `${email.slice(0, at)}@${domainToUnicode(ascii)}`;
}
