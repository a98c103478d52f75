import { Injectable } from '@nestjs/common';
import { EnvelopeCipher } from '../../shared/crypto/envelope-cipher';
import { UserPrincipal } from '../../shared/auth/auth-context';
import { Queryable } from '../../shared/db/db.service';
import { generateRecoveryCodes, hashRecoveryCode, normalizeRecoveryCode } from './recovery-codes';
import { generateTotpSecret, matchTotpStep } from './totp';

/** How a second factor was proven (RFC 8176 `amr` value; `recovery` for a recovery code). */
export type MfaMethod = 'otp' | 'recovery';

export interface TotpFactor {
  id: string;
  secret_enc: string;
  enabled_at: Date | null;
  /** who started a pending enrollment (setupCaller); null on factors from before it was recorded */
  setup_by: string | null;
}

/**
 * The caller a pending enrollment belongs to: its session, or the enrollment-only token of a
 * sign-in (no session). Only the caller who started it completes it (verify-setup).
 */
export function setupCaller(user: UserPrincipal): string {
  return user.sessionId ? `sid:${user.sessionId}` : `jti:${user.claims.jti}`;
}

/**
 * The mfa module's tables: TOTP factors (seed envelope-encrypted, AAD bound to the user, so a
 * row copied to another user does not decrypt) and hashed recovery codes. Every acceptance of a
 * code is a conditional update, so a code is accepted once even under parallel requests.
 *
 * Recovery codes are hashed under a key derived from the current KEY_ENCRYPTION_KEY, whose
 * fingerprint they record (`key_id`); a code hashed under a key of KEY_ENCRYPTION_KEY_PREVIOUS
 * still verifies (an HMAC cannot be re-keyed without the code: such codes work as long as their
 * key stays there, and `kek:rewrap` counts the users who hold them).
 */
@Injectable()
export class MfaFactorsService {
  /** the current key first, then those of KEY_ENCRYPTION_KEY_PREVIOUS */
  private readonly recoveryKeys: Buffer[];

  constructor(private readonly cipher: EnvelopeCipher) {
    this.recoveryKeys = cipher.deriveKeys('mfa-recovery-codes');
  }

  private aad(userId: string): string {
    return `mfa-totp:${userId}`;
  }

  /** Stores a new pending seed (replacing a pending one); null when a factor is already enabled. */
  async startSetup(tx: Queryable, tenantId: string, userId: string, setupBy: string): Promise<string | null> {
    const secret = generateTotpSecret();
    const rows = await tx.query<{ id: string }>(
      `INSERT INTO user_mfa_factors (tenant_id, user_id, kind, secret_enc, setup_by) VALUES ($1, $2, 'totp', $3, $4)
       ON CONFLICT (user_id, kind) DO UPDATE
         SET secret_enc = EXCLUDED.secret_enc, setup_by = EXCLUDED.setup_by, created_at = now(), last_used_step = 0, last_used_at = NULL
       WHERE user_mfa_factors.enabled_at IS NULL
       RETURNING id`,
      [tenantId, userId, this.cipher.encrypt(secret, this.aad(userId)), setupBy],
    );
    return rows.length ? secret : null;
  }

  /** The user's TOTP factor (pending or enabled), locked for the caller's transaction. */
  /** Who started the user's pending enrollment (setupCaller), read without a lock; undefined: none pending. */
  async pendingSetupBy(q: Queryable, tenantId: string, userId: string): Promise<string | null | undefined> {
    const [f] = await q.query<{ setup_by: string | null }>(
      `SELECT setup_by FROM user_mfa_factors WHERE user_id = $1 AND tenant_id = $2 AND kind = 'totp' AND enabled_at IS NULL`,
      [userId, tenantId],
    );
    return f?.setup_by;
  }

  async lockFactor(tx: Queryable, tenantId: string, userId: string): Promise<TotpFactor | undefined> {
    const [f] = await tx.query<TotpFactor>(
      `SELECT id, secret_enc, enabled_at, setup_by FROM user_mfa_factors WHERE user_id = $1 AND tenant_id = $2 AND kind = 'totp' FOR UPDATE`,
      [userId, tenantId],
    );
    return f;
  }

  /** Matching time step of `code` for this factor's seed, or null (no state change). */
  matchStep(userId: string, factor: TotpFactor, code: string): number | null {
    return matchTotpStep(this.cipher.decryptString(factor.secret_enc, this.aad(userId)), code);
  }

  /** Enables a pending factor; its setup code's step counts as used. False when already enabled. */
  async enable(tx: Queryable, factorId: string, step: number): Promise<boolean> {
    const { rowCount } = await tx.exec(
      `UPDATE user_mfa_factors SET enabled_at = now(), last_used_step = $2, last_used_at = now() WHERE id = $1 AND enabled_at IS NULL`,
      [factorId, step],
    );
    return rowCount === 1;
  }

  /**
   * Verifies a code of an enabled factor: a TOTP code (exactly 6 digits) is accepted once per time
   * step (`WHERE last_used_step < step`: a code already used in its step, or older than the last
   * accepted one, is refused); with `allowRecovery`, an unused recovery code is consumed instead.
   * The factor row is locked first, whichever kind of code is presented: every transaction that
   * uses or changes a user's codes (sign-in, disable, regeneration) then locks the factor before
   * any recovery code, in one order. A recovery code locked first deadlocked with a TOTP-confirmed
   * regeneration or a second disable (500). A caller that waited finds the winner's outcome.
   */
  async verify(tx: Queryable, tenantId: string, userId: string, code: string, allowRecovery: boolean): Promise<MfaMethod | null> {
    const [f] = await tx.query<TotpFactor>(
      `SELECT id, secret_enc, enabled_at FROM user_mfa_factors
        WHERE user_id = $1 AND tenant_id = $2 AND kind = 'totp' AND enabled_at IS NOT NULL
        FOR UPDATE`,
      [userId, tenantId],
      'mfa_factor_enabled',
    );
    if (!f) return null;
    if (/^\d{6}$/.test(code)) {
      const step = this.matchStep(userId, f, code);
      if (step === null) return null;
      const { rowCount } = await tx.exec(
        `UPDATE user_mfa_factors SET last_used_step = $2, last_used_at = now() WHERE id = $1 AND last_used_step < $2`,
        [f.id, step],
        'mfa_factor_use_step',
      );
      return rowCount === 1 ? 'otp' : null;
    }
    if (!allowRecovery) return null;
    const normalized = normalizeRecoveryCode(code);
    if (!normalized) return null;
    // its hash under each configured key (one set of codes per user: at most one matches)
    const { rowCount } = await tx.exec(
      `UPDATE mfa_recovery_codes SET used_at = now() WHERE user_id = $1 AND code_hash = ANY($2::text[]) AND used_at IS NULL`,
      [userId, this.recoveryKeys.map((k) => hashRecoveryCode(k, userId, normalized))],
      'mfa_recovery_use',
    );
    return rowCount > 0 ? 'recovery' : null;
  }

  /** Replaces every recovery code of the user with 10 new ones; returns them (shown once). */
  async replaceRecoveryCodes(tx: Queryable, tenantId: string, userId: string): Promise<string[]> {
    const codes = generateRecoveryCodes();
    const hashes = codes.map((c) => hashRecoveryCode(this.recoveryKeys[0], userId, normalizeRecoveryCode(c)!));
    await tx.query(
      `WITH d AS (DELETE FROM mfa_recovery_codes WHERE user_id = $2)
       INSERT INTO mfa_recovery_codes (tenant_id, user_id, code_hash, key_id) SELECT $1, $2, unnest($3::text[]), $4`,
      [tenantId, userId, hashes, this.cipher.keyId],
    );
    return codes;
  }

  /** Removes the factor and the recovery codes (disable). False when no factor was enabled. */
  async remove(tx: Queryable, tenantId: string, userId: string): Promise<boolean> {
    const [r] = await tx.query<{ removed: number }>(
      `WITH f AS (DELETE FROM user_mfa_factors WHERE user_id = $1 AND tenant_id = $2 AND enabled_at IS NOT NULL RETURNING id),
            c AS (DELETE FROM mfa_recovery_codes WHERE user_id = $1 AND EXISTS (SELECT 1 FROM f))
       SELECT count(*)::int AS removed FROM f`,
      [userId, tenantId],
    );
    return r.removed === 1;
  }
}
