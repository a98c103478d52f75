import { Injectable, OnModuleInit } from '@nestjs/common';
import { randomToken, sha256Hex } from '../../shared/crypto/tokens';
import { Db } from '../../shared/db/db.service';
import { AppError, InvalidTokenError } from '../../shared/errors/app-error';
import { SessionsService, SessionUser } from '../sessions/sessions.service';
import { FirstFactorContext, LoginDecision, LoginPolicy } from '../users/login-policy.service';
import { EnrollmentProof, EnrollmentTokenService } from './enrollment-token.service';
import { EnrollmentState, enrollmentState } from './mfa-policy';

/** Lifetime of an mfa_challenge_token (short-lived, single use). */
export const MFA_CHALLENGE_TTL_SECONDS = 300;
/** Wrong codes after which a challenge is dead (issue 5 item 5). */
export const MFA_CHALLENGE_MAX_ATTEMPTS = 5;

interface PolicyRow {
  mfa_enabled: boolean;
  mfa_policy: 'optional' | 'required';
  mfa_grace_period_days: number;
  mfa_required_since: Date | null;
  tenant_created_at: Date;
  /** when the account began as a registered user: its creation, or its claim for a former guest */
  account_start: Date | null;
}

/**
 * Plugs MFA into password sign-in (LoginPolicy seam of the users module), after the password was
 * found correct:
 * - a user with an enabled TOTP factor gets `{mfa_required: true, mfa_challenge_token}` instead of
 *   tokens (contract "End users"); the token is random, stored as SHA-256, 5 minutes, single use;
 * - spec 2.8 `mfa_policy: required`, user without MFA: within the grace the access token carries
 *   `mfa_enrollment_required: true` (and `mfa_enrollment_deadline`, NumericDate); afterwards 403
 *   `mfa/enrollment_required` with an enrollment-only token in the problem body.
 */
@Injectable()
export class MfaLoginPolicy implements OnModuleInit {
  constructor(
    private readonly db: Db,
    private readonly loginPolicy: LoginPolicy,
    private readonly enrollmentTokens: EnrollmentTokenService,
    private readonly sessions: SessionsService,
  ) {}

  onModuleInit(): void {
    this.loginPolicy.register((user: SessionUser, ctx?: FirstFactorContext) => this.decide(user, ctx));
    // refresh passes its row: the token records the session's sign-in (auth_time), which a refresh
    // does not renew, so the token of an old session does not start enrollment (nor one without it)
    this.sessions.onEnrollmentEnforced((user) => this.enrollmentRequired(user, { auth_time: user.auth_time, sid: user.session_id }, () => new AppError('auth/invalid_refresh_token')));
  }

  async decide(user: SessionUser, firstFactor?: FirstFactorContext): Promise<LoginDecision | undefined> {
    if (user.is_anonymous) return undefined;
    const policy = await this.policyFor(user);
    if (!policy) return undefined;
    if (policy.mfaEnabled) return { challenge: { mfa_required: true, mfa_challenge_token: await this.createChallenge(user, firstFactor) } };
    // a first factor was proved just now: an enrollment-only token of the enforced policy says so
    const extraClaims = await this.enrollmentClaims(user, policy.state, { auth_time: Math.floor(Date.now() / 1000) });
    return Object.keys(extraClaims).length ? { extraClaims } : undefined;
  }

  /**
   * For a new access token of a running session that is not a sign-in (step-up): the enrollment
   * claims of the grace as of now, or sign-in's 403 once the grace is over, so that a session
   * started before the deadline cannot outlive it; nothing when MFA is enabled or not required.
   * `proof` is what the 403's enrollment-only token records of the step-up.
   */
  async sessionEnrollmentClaims(user: SessionUser, proof: EnrollmentProof): Promise<Record<string, unknown>> {
    const policy = user.is_anonymous ? undefined : await this.policyFor(user);
    // the user erased meanwhile: the bearer's token is dead
    return policy && !policy.mfaEnabled ? this.enrollmentClaims(user, policy.state, proof, () => new InvalidTokenError()) : {};
  }

  private async policyFor(user: SessionUser): Promise<{ mfaEnabled: boolean; state: EnrollmentState } | undefined> {
    const [p] = await this.db.query<PolicyRow>(
      `SELECT EXISTS (SELECT 1 FROM user_mfa_factors f WHERE f.user_id = $1 AND f.enabled_at IS NOT NULL) AS mfa_enabled,
              t.mfa_policy, t.mfa_grace_period_days, t.mfa_required_since, t.created_at AS tenant_created_at,
              (SELECT greatest(u.created_at, u.claimed_at) FROM users u WHERE u.id = $1) AS account_start
         FROM tenants t WHERE t.id = $2`,
      [user.id, user.tenant_id],
      'mfa_login_policy',
    );
    if (!p) return undefined;
    const state = enrollmentState(
      { mfaPolicy: p.mfa_policy, graceDays: p.mfa_grace_period_days, requiredSince: p.mfa_required_since, tenantCreatedAt: p.tenant_created_at },
      // a guest claimed by registering starts its grace at the claim (guests cannot enroll); a caller
      // whose account is not committed yet (register, claim) passes its start as created_at
      new Date(Math.max(new Date(user.created_at).getTime(), p.account_start ? new Date(p.account_start).getTime() : 0)),
    );
    return { mfaEnabled: p.mfa_enabled, state };
  }

  /** The grace's claims; the enforced state throws sign-in's 403 (enrollment-only token granted on `proof`). */
  private async enrollmentClaims(user: SessionUser, state: EnrollmentState, proof: EnrollmentProof, gone?: () => Error): Promise<Record<string, unknown>> {
    if (state.kind === 'grace') return { mfa_enrollment_required: true, mfa_enrollment_deadline: Math.floor(state.deadline.getTime() / 1000) };
    if (state.kind === 'enforced') throw await this.enrollmentRequired(user, proof, gone);
    return {};
  }

  /**
   * 403 mfa/enrollment_required with an enrollment-only token (sign-in and refresh alike); `gone`
   * when the user was erased since it was read (a sign-in's default: as for an unknown account).
   */
  private async enrollmentRequired(user: SessionUser, proof: EnrollmentProof, gone: () => Error = () => new AppError('auth/invalid_credentials')): Promise<Error> {
    const issued = await this.enrollmentTokens.issue(user, proof);
    if (!issued) return gone();
    const { token, expiresIn } = issued;
    return new AppError('mfa/enrollment_required', 'The tenant requires MFA: enroll TOTP with the enrollment_token, then sign in again', {
      extensions: { enrollment_token: token, enrollment_token_expires_in: expiresIn },
      headers: { 'Cache-Control': 'no-store' },
    });
  }

  private async createChallenge(user: SessionUser, firstFactor?: FirstFactorContext): Promise<string> {
    const token = randomToken();
    const oauthParams = firstFactor?.oauthParams;
    // the user's expired challenges are dropped on the way (nothing else reads them). The user's
    // row is locked and its password hash compared with the first factor's (FirstFactorContext): a
    // reset or change committed since the first factor (it deletes the user's challenges) leaves
    // no row, so no challenge; one still running waits for this insert and then deletes it. The
    // same for the client of an authorization request the first factor carried (a link or code
    // mailed with it): share-locked, so a revocation committed since the link was used leaves no
    // challenge, and one under way waits for this insert and voids it with the client's sign-ins
    const [made] = await this.db.query<{ ok: number }>(
      `WITH gc AS (DELETE FROM mfa_challenges WHERE user_id = $2 AND expires_at < now())
       INSERT INTO mfa_challenges (token_hash, tenant_id, user_id, kind, expires_at, first_factor_amr, oauth_params)
       SELECT $1, $3, $2, 'login', now() + make_interval(secs => $4), $5, $6::jsonb
         FROM users WHERE id = $2 AND ($7::text[] IS NULL OR COALESCE(password_hash, '') = ANY($7::text[]))
          AND ($6::jsonb IS NULL OR EXISTS (
                SELECT 1 FROM oauth_clients c WHERE c.id = ($6::jsonb->>'client_id')::uuid AND c.tenant_id = $3 AND c.revoked_at IS NULL FOR SHARE))
         FOR SHARE OF users
       RETURNING 1 AS ok`,
      [sha256Hex(token), user.id, user.tenant_id, MFA_CHALLENGE_TTL_SECONDS, firstFactor?.amr ?? ['pwd'], oauthParams ? JSON.stringify(oauthParams) : null, firstFactor?.passwordHashes ?? null],
      'mfa_challenge_create',
    );
    if (!made) throw new AppError('auth/invalid_credentials');
    return token;
  }
}
