import { MigrationInterface, QueryRunner } from 'typeorm';
import { domainToASCII, domainToUnicode } from 'url';
import { rewriteSpellings } from './email-spelling-rewrite';

/**
 * A stored spelling whose domain reaches another DNS name once lower-cased (a capital ẞ, which
 * IDNA maps to `ss` but mail software lower-cases to ß; a capital Σ ending the name, σ for IDNA, ς
 * in lower case) had its mail go to another domain than the one its key names: `kim@busineẞ.com`
 * holds the key of kim@business.com, but its mail went to busineß.com. Such addresses are refused
 * now; stored ones take their key's domain (`kim@business.com`), so the account's mail reaches the
 * mailbox the key names and its owner can take it over by a reset. Keys do not change; a row whose
 * key would is left for an operator. Pages of rows with a non-ASCII domain (rewriteSpellings).
 */
export class EmailDomainCase1765300000000 implements MigrationInterface {
  name = 'EmailDomainCase1765300000000';

  async up(q: QueryRunner): Promise<void> {
    await rewriteSpellings(q, `email ~ '@.*[^\\x01-\\x7F]'`, keyDomainSpelling);
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
