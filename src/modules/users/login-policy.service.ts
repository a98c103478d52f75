import { Injectable } from '@nestjs/common';
import { Queryable } from '../../shared/db/db.service';
import { SessionUser } from '../sessions/sessions.service';
import { MfaRequiredResponse } from './login/login-user.command';

export interface LoginDecision {
  /** answer this instead of tokens (MFA challenge) */
  challenge?: MfaRequiredResponse;
  /** claims added to the access token (mfa_enrollment_required, ...) */
  extraClaims?: Record<string, unknown>;
}

/** How the user proved the first factor (RFC 8176 amr values, e.g. ['pwd'] or ['email']). */
export interface FirstFactorContext {
  amr: string[];
  /** the authorization request a passwordless sign-in resumes: kept on an MFA challenge and answered after it */
  oauthParams?: Record<string, string> | null;
  /**
   * The account's password as the first factor found it: for a password sign-in the stored hashes
   * the password was verified against (the one read, and its upgrade); for a passwordless one the
   * hash stored when the link or code was consumed (NO_PASSWORD for none). What it opens (an MFA
   * challenge, a session) is only made while one of them is still stored: a reset or change
   * committed since ends the sessions and challenges that existed, and this one would outlive it.
   */
  passwordHashes?: string[];
}

/** What `passwordHashes` holds for an account without a password (no stored hash is empty). */
export const NO_PASSWORD = '';

/**
 * Locks the user's row to the end of the transaction and tells whether its password is still one
 * of `passwordHashes` (see FirstFactorContext). Called where a sign-in starts its session: a reset
 * or change committed since the first factor was proved leaves false; one still running waits for
 * this transaction and then ends the session it started.
 */
export async function passwordUnchanged(tx: Queryable, userId: string, passwordHashes: string[]): Promise<boolean> {
  const rows = await tx.query(`SELECT 1 FROM users WHERE id = $1 AND COALESCE(password_hash, '') = ANY($2::text[]) FOR NO KEY UPDATE`, [userId, passwordHashes], 'user_login_recheck');
  return rows.length > 0;
}

type Hook = (user: SessionUser, ctx?: FirstFactorContext) => Promise<LoginDecision | undefined>;

/** The seam after a correct first factor (password, magic link, email code): MFA and the tenant's MFA policy plug in here. */
@Injectable()
export class LoginPolicy {
  private readonly hooks: Hook[] = [];

  register(hook: Hook): void {
    this.hooks.push(hook);
  }

  async afterPassword(user: SessionUser, ctx: FirstFactorContext = { amr: ['pwd'] }): Promise<LoginDecision> {
    const extraClaims: Record<string, unknown> = {};
    for (const h of this.hooks) {
      const d = await h(user, ctx);
      if (d?.challenge) return d;
      if (d?.extraClaims) Object.assign(extraClaims, d.extraClaims);
    }
    return { extraClaims };
  }

  /**
   * The claims of the first tokens of an account that begins now (registration, a guest claimed by
   * registering): the policy counts the account from now, whatever the row says (a claimed guest's
   * row is as old as the guest). A new account has no second factor yet, so it is never challenged.
   * Called before the account's transaction (the id may not be committed yet): only the id and
   * the tenant matter to the policy.
   */
  async forNewAccount(account: { id: string; tenant_id: string }, amr: string[]): Promise<Record<string, unknown>> {
    const user: SessionUser = { ...account, email: null, email_verified: false, is_anonymous: false, role: '', created_at: new Date() };
    const d = await this.afterPassword(user, { amr });
    if (d.challenge) throw new Error('a new account was asked for a second factor');
    return d.extraClaims ?? {};
  }
}
