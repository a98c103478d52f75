import { Injectable } from '@nestjs/common';
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
   * A password sign-in: the stored hashes the password was verified against (the one read, and its
   * upgrade). What it opens (an MFA challenge) is only made while one of them is still stored: a
   * reset or change committed since ends the sessions and challenges of the old password.
   */
  passwordHashes?: string[];
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
