import { Injectable } from '@nestjs/common';
import { AccessClaims, JwtService, TokenVerificationError } from '../../shared/crypto/jwt.service';
import { UUID } from '../../shared/uuid';
import { enrollmentAudience } from '../mfa/enrollment-audience';

const MAX_TOKEN_LENGTH = 16_384;

/**
 * Reads an access token presented to introspection or revocation: ours (signature, kid, iss,
 * exp), of the caller's tenant, and for user tokens our audience (agent tokens carry the audience
 * the agent asked for). Anything else is null: "not a token of ours" (RFC 7662, RFC 7009).
 * `enrollmentTokens`: also an enrollment-only token (its own audience, spec 2.8). Revocation takes
 * them (a leaked one must be revocable); introspection does not, as no resource server's token.
 */
@Injectable()
export class AccessTokenReader {
  constructor(private readonly jwt: JwtService) {}

  async read(token: string, tenantId: string, { enrollmentTokens = false } = {}): Promise<AccessClaims | null> {
    if (token.length > MAX_TOKEN_LENGTH || token.split('.').length !== 3) return null;
    let claims: AccessClaims;
    try {
      claims = await this.jwt.verify(token, { audience: false });
    } catch (e) {
      if (e instanceof TokenVerificationError) return null;
      throw e;
    }
    if (claims.tenant_id !== tenantId || typeof claims.sub !== 'string' || !UUID.test(claims.sub) || typeof claims.jti !== 'string') return null;
    if (claims.act !== undefined && (typeof claims.act?.sub !== 'string' || !UUID.test(claims.act.sub))) return null;
    if (!claims.act) {
      const want = enrollmentTokens && claims.mfa_enrollment_only === true ? enrollmentAudience(this.jwt.audience) : this.jwt.audience;
      if (!(Array.isArray(claims.aud) ? claims.aud.includes(want) : claims.aud === want)) return null;
    }
    return claims;
  }
}
