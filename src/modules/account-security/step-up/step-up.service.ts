import { Injectable } from '@nestjs/common';
import { UserPrincipal } from '../../../shared/auth/auth-context';
import { Db } from '../../../shared/db/db.service';
import { insufficientScope, InvalidTokenError } from '../../../shared/errors/app-error';
import { SessionsService } from '../../sessions/sessions.service';

export interface StepUpSubject {
  userId: string;
  tenantId: string;
  sessionId: string;
  email: string;
  emailNormalized: string;
  /** the address is verified: only then does its mail carry text the caller chose (the action hint) */
  emailVerified: boolean;
}

/**
 * Who may step up by magic link or email code (spec 2.5): a registered user's own live session
 * (no guest, no agent token) whose account has an address. The link or code is bound to that
 * session; the fresh token comes from the MFA module's StepUpTokenService (one minting rule for
 * every step-up method).
 */
@Injectable()
export class StepUpService {
  constructor(
    private readonly db: Db,
    private readonly sessions: SessionsService,
  ) {}

  async subject(p: UserPrincipal): Promise<StepUpSubject> {
    if (p.claims.act) throw insufficientScope('Agent tokens cannot step up');
    if (p.isAnonymous) throw insufficientScope('Guests have no email address to step up with');
    if (!p.sessionId) throw insufficientScope('This token has no session to step up');
    // live and within SESSION_MAX_AGE_SECONDS, before anything is mailed (the rule password step-up uses)
    await this.sessions.assertCanStepUp(p.sessionId, p.userId, p.tenantId);
    const [u] = await this.db.query<{ email: string | null; email_normalized: string | null; email_verified: boolean }>(
      `SELECT email, email_normalized, email_verified FROM users WHERE id = $1 AND tenant_id = $2`,
      [p.userId, p.tenantId],
      'step_up_subject',
    );
    if (!u) throw new InvalidTokenError();
    if (!u.email || !u.email_normalized) throw insufficientScope('The account has no email address to step up with');
    return { userId: p.userId, tenantId: p.tenantId, sessionId: p.sessionId, email: u.email, emailNormalized: u.email_normalized, emailVerified: u.email_verified };
  }
}
