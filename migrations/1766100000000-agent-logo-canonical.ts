import { MigrationInterface, QueryRunner } from 'typeorm';

/** Frozen copy of the logo URL rule as of this migration (a migration never imports src/). */
const UNSAFE = /[\s\p{Cc}\p{Cf}\\]/u;

/**
 * The spelling stored for an agent's logo URL as of this migration: the URL parser's
 * serialization, or null for a value the new rule refuses (whitespace, controls, format
 * characters or backslashes, which the parser dropped or rewrote before the old check, so the
 * string stored was not the one checked; or longer than 2048 once serialized).
 */
export function canonicalStoredLogo(raw: string): string | null {
  if (UNSAFE.test(raw)) return null;
  try {
    const href = new URL(raw).href;
    return href.length <= 2048 ? href : null;
  } catch {
    return null;
  }
}

/**
 * Agents' logo URLs are stored as the URL parser spells them (percent-encoded, host lower-cased):
 * rows written before keep what was typed, quotes and angle brackets included, and are rewritten;
 * one the new rule refuses is cleared (the logo is cosmetic, the agent unchanged otherwise).
 * Forward-only: the previous code reads the new values as they are.
 */
export class AgentLogoCanonical1766100000000 implements MigrationInterface {
  name = 'AgentLogoCanonical1766100000000';

  async up(q: QueryRunner): Promise<void> {
    const rows: { id: string; logo_url: string }[] = await q.query(`SELECT id, logo_url FROM agent_clients WHERE logo_url IS NOT NULL`);
    for (const r of rows) {
      const next = canonicalStoredLogo(r.logo_url);
      if (next !== r.logo_url) await q.query(`UPDATE agent_clients SET logo_url = $2 WHERE id = $1`, [r.id, next]);
    }
  }

  async down(): Promise<void> {
    // forward-only (see above)
  }
}
