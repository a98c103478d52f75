import { domainToASCII, domainToUnicode } from 'url';
import { MigrationInterface, QueryRunner } from 'typeorm';
import { rewriteEmailKeys } from './email-key-rewrite';

/**
 * Frozen copy of normalizeEmail as of this migration (a migration never imports src/): the key
 * of 1764700000000-email-nfkc, then the domain in its IDNA (UTS 46) Unicode form.
 */
function emailKey(email: string): string {
  const key = email.trim().normalize('NFKC').trim().toLowerCase().replace(/\u03c2/g, '\u03c3').normalize('NFKC');
  const at = key.lastIndexOf('@');
  if (at < 0) return key;
  const domain = key.slice(at + 1);
  if (/^[a-z0-9.-]*$/.test(domain) && !domain.includes('xn--')) return key;
  const ascii = domainToASCII(domain);
  return key.slice(0, at + 1) + (ascii ? domainToUnicode(ascii) : domain);
}

/** Only a key whose domain has a non-ASCII character or an A-label can change. */
const IDN = `t.email_normalized ~ '@.*([^\\x01-\\x7F]|xn--)'`;

/**
 * Email domains are now compared in their IDNA Unicode form: `x@xn--mnchen-3ya.de` and
 * `x@münchen.de` are one address (one DNS name), so the same mailbox cannot hold two accounts of a
 * tenant and the tenant's domain lists apply to either spelling. Stored keys are rewritten as in
 * 1764700000000-email-nfkc (see rewriteEmailKeys: a pair that would collide keeps its keys, for an
 * operator to resolve). Tenants' domain lists are compared in that form at check time.
 */
export class EmailIdn1765100000000 implements MigrationInterface {
  name = 'EmailIdn1765100000000';

  async up(q: QueryRunner): Promise<void> {
    await rewriteEmailKeys(q, 'users', true, true, emailKey, IDN);
    await rewriteEmailKeys(q, 'dashboard_users', false, true, emailKey, IDN);
    await rewriteEmailKeys(q, 'dashboard_invites', false, false, emailKey, IDN);
  }

  async down(): Promise<void> {
    // forward-only: the new keys are keys the previous code can still compare against
  }
}
