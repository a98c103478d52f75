import { Inject, Injectable } from '@nestjs/common';
import { APP_CONFIG, AppConfig } from '../../config/config';
import { AccessClaims, JwtService } from '../../shared/crypto/jwt.service';
import { sha256Hex } from '../../shared/crypto/tokens';
import { Db, Queryable } from '../../shared/db/db.service';
import type { ProofRule } from '../../shared/auth/step-up.guard';
import { SessionUser } from '../sessions/sessions.service';
import { enrollmentAudience } from './enrollment-audience';

/** The only scope of an enrollment-only token. */
export const MFA_ENROLL_SCOPE = 'mfa:enroll';

/**
 * The proof of the account an enrollment-only token was granted on (NumericDate seconds), carried
 * as its claims: TOTP setup requires one to be recent, as of a regular token.
 */
export interface EnrollmentProof {
  /** a sign-in's time (now at sign-in; a refresh's is its session's, which a refresh does not renew) */
  auth_time?: number;
  /** a step-up's time */
  step_up_at?: number;
  /**
   * the session a refresh or step-up of it was refused in (not a sign-in's: it opened none): the
   * enrolling session, which goes on once the factor is on while the user's other sessions below
   * AAL2 end (VerifyTotpSetupHandler); the token dies with it, as every bearer with a `sid`
   */
  sid?: string;
}

/**
 * The enrollment-only token of spec 2.8 (login after the MFA grace period): an RS256 access token
 * with `scope: mfa:enroll`, `mfa_enrollment_only: true`, and its own audience; a sign-in's names no
 * session, one from a refresh or step-up names its session (`sid`) and dies with it
 * (`<TOKEN_AUDIENCE>/v1/auth/mfa/totp`). The audience is what confines it: the bearer guard of
 * every other endpoint, token exchange, introspection and any resource server checking `aud`
 * refuse it; only MfaEnrollmentGuard (TOTP setup and verify-setup) accepts it, and RFC 7009
 * revocation by the tenant's API key revokes it.
 *
 * Each one is also a pending challenge of kind `enrollment` (mfa_challenges, keyed by a hash of
 * its jti): it was granted on the password of the moment, so whatever ends the user's sessions
 * for a credential change (password reset or change, sign-out everywhere) deletes it with the
 * login challenges, and the token stops working although it has not expired.
 *
 * It carries the time of that proof (EnrollmentProof): a token from a refresh of an old session
 * does not start enrollment (TOTP setup's freshness check); the user signs in again.
 */
@Injectable()
export class EnrollmentTokenService {
  constructor(
    private readonly jwt: JwtService,
    private readonly db: Db,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  get audience(): string {
    return enrollmentAudience(this.jwt.audience);
  }

  /**
   * The token and its grant, or null when the user no longer exists: an erasure committed since the
   * user was read leaves no row to key-share-lock (one under way waits for the grant and removes it).
   */
  async issue(user: SessionUser, proof: EnrollmentProof): Promise<{ token: string; expiresIn: number } | null> {
    const ttl = this.config.MFA_ENROLLMENT_TOKEN_TTL_SECONDS;
    const { token, claims } = await this.jwt.sign(
      {
        aud: this.audience,
        sub: user.id,
        tenant_id: user.tenant_id,
        scope: MFA_ENROLL_SCOPE,
        amr: ['pwd'],
        aal: 'AAL1',
        role: user.role,
        is_anonymous: false,
        email: user.email,
        email_verified: user.email_verified,
        mfa_enrollment_only: true,
        ...proof,
      },
      ttl,
    );
    const granted = await this.db.query(
      // the user's expired challenges are dropped on the way, as sign-in's challenges do
      `WITH gc AS (DELETE FROM mfa_challenges WHERE user_id = $3 AND expires_at < now())
       INSERT INTO mfa_challenges (token_hash, tenant_id, user_id, kind, expires_at)
       SELECT $1, $2, $3, 'enrollment', now() + make_interval(secs => $4) FROM users WHERE id = $3 AND tenant_id = $2 FOR KEY SHARE
       RETURNING 1`,
      [grantKey(claims.jti), user.tenant_id, user.id, ttl],
    );
    if (!granted.length) return null;
    return { token, expiresIn: ttl };
  }

  /** The user enrolled: their enrollment-only tokens are spent (in the enrollment's transaction). */
  async spend(tx: Queryable, userId: string): Promise<void> {
    await tx.query(`UPDATE mfa_challenges SET used_at = now() WHERE user_id = $1 AND kind = 'enrollment' AND used_at IS NULL`, [userId]);
  }

  /** Whether the grant of a verified enrollment-only token still stands (not ended by a credential change). */
  async granted(claims: AccessClaims): Promise<boolean> {
    const rows = await this.db.query(
      `SELECT 1 FROM mfa_challenges
        WHERE token_hash = $1 AND kind = 'enrollment' AND user_id = $2 AND tenant_id = $3 AND used_at IS NULL AND expires_at > now()`,
      [grantKey(claims.jti), claims.sub, claims.tenant_id],
    );
    return rows.length > 0;
  }

  /** Verifies an enrollment-only token (signature, iss, exp, our enrollment audience, claims). */
  async verify(token: string): Promise<AccessClaims | null> {
    try {
      const claims = await this.jwt.verify(token, { audience: this.audience });
      if (claims.mfa_enrollment_only !== true || claims.scope !== MFA_ENROLL_SCOPE || !claims.sub || !claims.tenant_id || claims.act) return null;
      return claims;
    } catch {
      return null;
    }
  }
}

/** How far apart a token's issue time and the proof it records may be for it to count as minted with that proof. */
const PROOF_MINT_SLACK_SECONDS = 5;

/**
 * TOTP setup's rule for an enrollment-only token (RequireStepUp's ProofRule): one minted with the
 * proof it records (a sign-in, a step-up: the proof's time is its issue time) is that proof, and
 * counts for its whole lifetime, as long as or longer than the route's limit; one minted later (on
 * a refresh: its session's sign-in) has the route's limit. It cannot step up: its holder signs in
 * again (a new one comes with the sign-in).
 */
export const enrollmentProofRule: ProofRule = (claims, maxAge) => {
  if (claims.mfa_enrollment_only !== true) return undefined;
  const proofs = [claims.auth_time, claims.step_up_at].map(Number);
  const mintedWithProof = proofs.some((at) => Math.abs(claims.iat - at) <= PROOF_MINT_SLACK_SECONDS);
  const limit = mintedWithProof ? Math.max(maxAge, claims.exp - claims.iat || 0) : maxAge;
  return { maxAge: limit, refusal: `Sign in again: this enrollment-only token was not granted on a sign-in of the last ${limit} seconds` };
};

/** The mfa_challenges key of an enrollment-only token (never a login challenge's: those hash a random secret). */
const grantKey = (jti: string): string => sha256Hex(`enrollment:${jti}`);
