import { domainToASCII, domainToUnicode } from 'url';
import { MigrationInterface, QueryRunner } from 'typeorm';
import { rewriteEmailKeys } from './email-key-rewrite';

/**
 * Frozen copy of normalizeEmail as of this migration (a migration never imports src/): the local
 * part as in 1764700000000-email-nfkc, the domain in its IDNA (UTS 46) Unicode form.
 */
const fold = (s: string): string => s.toLowerCase().replace(/\u03c2/g, '\u03c3').normalize('NFKC');
export function emailKey(email: string): string {
  const text = email.trim().normalize('NFKC').trim();
  const at = text.lastIndexOf('@');
  if (at < 0) return fold(text);
  const d = text.slice(at + 1).normalize('NFKC');
  if (/^[A-Za-z0-9.-]*$/.test(d) && !/xn--/i.test(d)) return `${fold(text.slice(0, at))}@${d.toLowerCase()}`;
  const ascii = domainToASCII(d);
  return `${fold(text.slice(0, at))}@${ascii ? domainToUnicode(ascii) : fold(d)}`;
}

/** Only a key whose domain has a non-ASCII character or an A-label can change. */
const IDN = `t.email_normalized ~ '@.*([^\\x01-\\x7F]|xn--)'`;

/**
 * Email domains are now compared in their IDNA Unicode form: `x@xn--mnchen-3ya.de` and
 * `x@münchen.de` are one address (one DNS name), so the same mailbox cannot hold two accounts of a
 * tenant and the tenant's domain lists apply to either spelling. Stored keys are rewritten as in
 * 1764700000000-email-nfkc (see rewriteEmailKeys: a pair that would collide keeps its keys, for an
 * operator to resolve, and is listed in the migration's output). Tenants' domain lists are
 * compared in that form at check time. Short-lived links and codes (account_tokens,
 * email_otp_codes) keep the key they were issued under and are left to expire: one for an address
 * whose key changed no longer matches and is refused, and the user asks again. Deploy the new code
 * to every instance before running it (an instance on the old code would write A-label keys).
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
