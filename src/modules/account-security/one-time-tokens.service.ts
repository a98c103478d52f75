import { Injectable } from '@nestjs/common';
import { randomToken, sha256Hex } from '../../shared/crypto/tokens';
import { Queryable } from '../../shared/db/db.service';

/** What a link token is for; a token of one kind is never accepted as another. */
export type TokenKind = 'email_verification' | 'password_reset' | 'magic_link' | 'step_up_magic_link';

export interface TokenRow {
  id: string;
  user_id: string;
  email_normalized: string;
  session_id: string | null;
  binding_hash: string | null;
  oauth_params: Record<string, string> | null;
}

export interface IssueToken {
  tenantId: string;
  /** null: an unknown address; the same statement runs and writes nothing (comparable work) */
  userId: string | null;
  kind: TokenKind;
  emailNormalized: string;
  ttlSeconds: number;
  sessionId?: string | null;
  bindingHash?: string | null;
  oauthParams?: Record<string, string> | null;
}

const COLUMNS = 'id, user_id, email_normalized, session_id, binding_hash, oauth_params';

/**
 * Single-use link tokens (verification, reset, magic link, step-up link): 256 random bits, only
 * the SHA-256 stored, bound to tenant, user, kind and the address they were mailed to. A user has
 * one live token per kind (per session for step-up): issuing replaces the earlier ones.
 */
@Injectable()
export class OneTimeTokens {
  async issue(tx: Queryable, t: IssueToken): Promise<string> {
    const token = randomToken();
    // Parallel issues for one user and kind are serialized (until the caller's transaction ends),
    // in a statement of its own: the replacing statement below then starts after the other one
    // committed and sees its row, so exactly one live token is left. An unknown address takes the
    // same lock on its address (comparable work).
    await tx.query(
      'SELECT pg_advisory_xact_lock(hashtextextended($1, 0))',
      [`account_token:${t.tenantId}:${t.kind}:${t.userId ?? t.emailNormalized}`],
      'account_token_issue_lock',
    );
    await tx.query(
      `WITH u AS (SELECT id FROM users WHERE id = $1 AND tenant_id = $2),
            gone AS (DELETE FROM account_tokens
                      WHERE user_id IN (SELECT id FROM u) AND kind = $3
                        AND ($6::uuid IS NULL OR session_id = $6 OR expires_at < now()))
       INSERT INTO account_tokens (tenant_id, user_id, kind, token_hash, email_normalized, session_id, binding_hash, oauth_params, expires_at)
       SELECT $2, u.id, $3, $4, $5, $6, $7, $8, now() + make_interval(secs => $9) FROM u`,
      [t.userId, t.tenantId, t.kind, sha256Hex(token), t.emailNormalized, t.sessionId ?? null, t.bindingHash ?? null, t.oauthParams ? JSON.stringify(t.oauthParams) : null, t.ttlSeconds],
      'account_token_issue',
    );
    return token;
  }

  /** A live token of this tenant and kind, without using it (checks that must not burn it). */
  async find(db: Queryable, tenantId: string, kind: TokenKind, token: string): Promise<TokenRow | undefined> {
    const [row] = await db.query<TokenRow>(
      `SELECT ${COLUMNS} FROM account_tokens
        WHERE token_hash = $1 AND tenant_id = $2 AND kind = $3 AND used_at IS NULL AND expires_at > now()`,
      [sha256Hex(token), tenantId, kind],
      'account_token_find',
    );
    return row;
  }

  /** Uses a live token: a conditional update, so of parallel uses exactly one gets the row. */
  async consume(tx: Queryable, tenantId: string, kind: TokenKind, token: string): Promise<TokenRow | undefined> {
    const [row] = await tx.query<TokenRow>(
      `UPDATE account_tokens SET used_at = now()
        WHERE token_hash = $1 AND tenant_id = $2 AND kind = $3 AND used_at IS NULL AND expires_at > now()
        RETURNING ${COLUMNS}`,
      [sha256Hex(token), tenantId, kind],
      'account_token_consume',
    );
    return row;
  }

  /** Voids the user's live tokens of these kinds (a new password voids outstanding reset and sign-in links). */
  async voidForUser(tx: Queryable, userId: string, kinds: TokenKind[]): Promise<void> {
    await tx.query(`UPDATE account_tokens SET used_at = now() WHERE user_id = $1 AND kind = ANY($2) AND used_at IS NULL`, [userId, kinds]);
  }
}
