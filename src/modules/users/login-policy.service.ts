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
}
