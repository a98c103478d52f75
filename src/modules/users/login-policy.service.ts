import { Injectable } from '@nestjs/common';
import { SessionUser } from '../sessions/sessions.service';
import { MfaRequiredResponse } from './login/login-user.command';

export interface LoginDecision {
  /** answer this instead of tokens (MFA challenge) */
  challenge?: MfaRequiredResponse;
  /** claims added to the access token (mfa_enrollment_required, ...) */
  extraClaims?: Record<string, unknown>;
}

type Hook = (user: SessionUser) => Promise<LoginDecision | undefined>;

/** The seam after a correct password: MFA and the tenant's MFA policy plug in here. */
@Injectable()
export class LoginPolicy {
  private readonly hooks: Hook[] = [];

  register(hook: Hook): void {
    this.hooks.push(hook);
  }

  async afterPassword(user: SessionUser): Promise<LoginDecision> {
    const extraClaims: Record<string, unknown> = {};
    for (const h of this.hooks) {
      const d = await h(user);
      if (d?.challenge) return d;
      if (d?.extraClaims) Object.assign(extraClaims, d.extraClaims);
    }
    return { extraClaims };
  }
}
