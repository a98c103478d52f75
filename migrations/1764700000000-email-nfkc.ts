import { MigrationInterface, QueryRunner } from 'typeorm';
import { rewriteEmailKeys } from './email-key-rewrite';

/**
 * Frozen copy of normalizeEmail as of this migration (a migration never imports src/: the helper
 * may change later, this migration must not): trim, NFKC, trim, toLowerCase, final sigma ς to σ,
 * NFKC. Computed in Node, not in SQL (PostgreSQL lower() depends on the database's locale).
 */
function emailKey(email: string): string {
  return email.trim().normalize('NFKC').trim().toLowerCase().replace(/\u03c2/g, '\u03c3').normalize('NFKC');
}

/** Only keys with a non-ASCII character can change (an ASCII key is its own new key). */
const NON_ASCII = `t.email_normalized ~ '[^\\x01-\\x7F]'`;

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
    await rewriteEmailKeys(q, 'users', true, true, emailKey, NON_ASCII);
    // dashboard accounts: unique over the platform
    await rewriteEmailKeys(q, 'dashboard_users', false, true, emailKey, NON_ASCII);
    // pending invitations: no uniqueness
    await rewriteEmailKeys(q, 'dashboard_invites', false, false, emailKey, NON_ASCII);
  }

  async down(): Promise<void> {
    // forward-only: the new keys are keys the previous code can still compare against
  }
}
