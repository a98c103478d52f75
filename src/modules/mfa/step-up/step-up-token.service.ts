/*
 * Shared with the account-security module (step-up by magic link and email OTP, spec 2.5):
 *   src/modules/mfa/step-up/step-up-token.service.ts
 *   StepUpTokenService.issue(user: UserPrincipal, method: string): Promise<StepUpResponseDto>
 * Call it once the user proved `method` (RFC 8176 amr value: 'pwd', 'otp', 'email', ...); it answers
 * `{access_token, expires_in, token_type: 'Bearer'}`. Import MfaModule, which exports it.
 */
import { Injectable } from '@nestjs/common';
import { UserPrincipal } from '../../../shared/auth/auth-context';
import { Aal } from '../../../shared/crypto/jwt.service';
import { Db } from '../../../shared/db/db.service';
import { insufficientScope, InvalidTokenError } from '../../../shared/errors/app-error';
import { EventsService } from '../../../shared/events/events.service';
import { AUTH_TIME_SQL, SESSION_TOO_OLD_SQL, SessionsService, SessionUser } from '../../sessions/sessions.service';
import { MfaLoginPolicy } from '../mfa-login-policy.service';
import { StepUpResponseDto } from '../mfa.response.dto';

/** Claims `mint` sets itself, or that must not survive into a step-up token. */
const NOT_CARRIED = new Set([
  'iss', 'sub', 'aud', 'exp', 'iat', 'nbf', 'jti', 'tenant_id', 'sid', 'scope', 'amr', 'aal', 'role',
  'is_anonymous', 'email', 'email_verified', 'act', 'auth_time', 'step_up_at', 'mfa_enrollment_required', 'mfa_enrollment_deadline',
  'mfa_enrollment_only',
]);

/**
 * spec 2.5 step-up: a fresh access token for the caller's (live) session, whose `amr` is the
 * session's plus the method just verified and whose `step_up_at` is now (NumericDate seconds);
 * `aal` stays the session's. The MFA enrollment claims are the policy's of now (spec 2.8: once the
 * grace is over, sign-in's 403 `mfa/enrollment_required`, as refresh answers); other extra claims
 * of the presented token are carried over. No refresh token: refreshing yields plain tokens.
 */
@Injectable()
export class StepUpTokenService {
  constructor(
    private readonly db: Db,
    private readonly sessions: SessionsService,
    private readonly events: EventsService,
    private readonly mfaPolicy: MfaLoginPolicy,
  ) {}

  async issue(user: UserPrincipal, method: string): Promise<StepUpResponseDto> {
    if (user.isAnonymous || user.claims.act || !user.sessionId) {
      throw insufficientScope('Step-up needs a signed-in (non-guest, non-delegated) user session');
    }
    const [row] = await this.db.query<SessionUser & { amr: string[]; aal: Aal; auth_time: number; too_old: boolean; user_scopes: string }>(
      `SELECT s.amr, s.aal, ${AUTH_TIME_SQL('s')} AS auth_time, ${SESSION_TOO_OLD_SQL('s', 'u', '$4')} AS too_old,
              u.id, u.tenant_id, u.email, u.email_verified, u.is_anonymous, u.role, u.created_at, t.user_scopes
         FROM user_sessions s JOIN users u ON u.id = s.user_id JOIN tenants t ON t.id = s.tenant_id
        WHERE s.id = $1 AND s.user_id = $2 AND s.tenant_id = $3 AND s.revoked_at IS NULL`,
      [user.sessionId, user.userId, user.tenantId, this.sessions.maxAgeSeconds],
      'step_up_session',
    );
    if (!row) throw new InvalidTokenError();
    // past its absolute lifetime the session gets no fresh token, as refresh gives none
    if (row.too_old) await this.sessions.endTooOld(user.sessionId);
    const amr = [...new Set([...row.amr, method])];
    const stepUpAt = Math.floor(Date.now() / 1000);
    const enrollment = await this.mfaPolicy.sessionEnrollmentClaims(row, { auth_time: row.auth_time, step_up_at: stepUpAt, sid: user.sessionId });
    const carried = Object.fromEntries(Object.entries(user.claims).filter(([k]) => !NOT_CARRIED.has(k)));
    // auth_time stays the session's: step_up_at tells when this method was proved
    // the tenant's user scopes of now, as refresh signs them (contract "Tokens"): not the presented
    // token's, which a chain of step-ups would otherwise carry past an owner's narrowing
    const minted = await this.sessions.mint(row, row.user_scopes, user.sessionId, amr, row.aal, row.auth_time, { ...carried, ...enrollment, step_up_at: stepUpAt });
    await this.events.audit(this.db, {
      tenantId: user.tenantId,
      type: 'user.step_up',
      actorType: 'user',
      actorId: user.userId,
      targetType: 'session',
      targetId: user.sessionId,
      metadata: { method },
    });
    return { access_token: minted.access_token, expires_in: minted.expires_in, token_type: 'Bearer' };
  }
}
