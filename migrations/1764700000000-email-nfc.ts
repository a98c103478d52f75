import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Emails are now compared in Unicode NFC (normalizeEmail). Stored comparison keys that are not
 * NFC (an address typed with decomposed accents) are rewritten to NFC, so that the same address
 * typed either way finds the existing account. A key is left as it is when rewriting it would
 * collide with another account's key (two accounts that differ only in normalization form were
 * already created apart; a migration cannot merge accounts) and the unique indexes stay intact.
 * Every spelling now reaches the NFC account, so the one left cannot sign in by email until an
 * operator resolves the pair (README: the query that lists them). Short-lived codes and tokens are
 * left to expire.
 */
export class EmailNfc1764700000000 implements MigrationInterface {
  name = 'EmailNfc1764700000000';

  async up(q: QueryRunner): Promise<void> {
    // end users: unique per tenant
    await q.query(`
      WITH c AS (
        SELECT id, tenant_id, normalize(email_normalized, NFC) AS nfc
          FROM users WHERE email_normalized IS NOT NULL AND email_normalized IS NOT NFC NORMALIZED
      ), ok AS (
        SELECT c.id, c.nfc FROM c
         WHERE NOT EXISTS (SELECT 1 FROM users o WHERE o.tenant_id = c.tenant_id AND o.email_normalized = c.nfc)
           AND (SELECT count(*) FROM c c2 WHERE c2.tenant_id = c.tenant_id AND c2.nfc = c.nfc) = 1
      )
      UPDATE users u SET email_normalized = ok.nfc FROM ok WHERE u.id = ok.id`);
    // dashboard accounts: unique over the platform
    await q.query(`
      WITH c AS (
        SELECT id, normalize(email_normalized, NFC) AS nfc FROM dashboard_users WHERE email_normalized IS NOT NFC NORMALIZED
      ), ok AS (
        SELECT c.id, c.nfc FROM c
         WHERE NOT EXISTS (SELECT 1 FROM dashboard_users o WHERE o.email_normalized = c.nfc)
           AND (SELECT count(*) FROM c c2 WHERE c2.nfc = c.nfc) = 1
      )
      UPDATE dashboard_users u SET email_normalized = ok.nfc FROM ok WHERE u.id = ok.id`);
    // pending invites (no uniqueness)
    await q.query(`UPDATE dashboard_invites SET email_normalized = normalize(email_normalized, NFC) WHERE email_normalized IS NOT NFC NORMALIZED`);
  }

  async down(): Promise<void> {
    // forward-only: NFC keys are valid keys of the previous code too
  }
}
