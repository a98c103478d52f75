import { Inject, Injectable } from '@nestjs/common';
import { APP_CONFIG, AppConfig } from '../../config/config';
import { AccessClaims, JwtService } from '../../shared/crypto/jwt.service';
import { SessionUser } from '../sessions/sessions.service';

/** The only scope of an enrollment-only token. */
export const MFA_ENROLL_SCOPE = 'mfa:enroll';

/**
 * The enrollment-only token of spec 2.8 (login after the MFA grace period): an RS256 access token
 * with `scope: mfa:enroll`, `mfa_enrollment_only: true`, no session, and its own audience
 * (`<TOKEN_AUDIENCE>/v1/auth/mfa/totp`). The audience is what confines it: the bearer guard of
 * every other endpoint, token exchange, introspection and any resource server checking `aud`
 * refuse it; only MfaEnrollmentGuard (TOTP setup and verify-setup) accepts it.
 */
@Injectable()
export class EnrollmentTokenService {
  constructor(
    private readonly jwt: JwtService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  get audience(): string {
    return `${this.jwt.audience}/v1/auth/mfa/totp`;
  }

  async issue(user: SessionUser): Promise<{ token: string; expiresIn: number }> {
    const ttl = this.config.MFA_ENROLLMENT_TOKEN_TTL_SECONDS;
    const { token } = await this.jwt.sign(
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
      },
      ttl,
    );
    return { token, expiresIn: ttl };
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
