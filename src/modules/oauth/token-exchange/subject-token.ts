import { Injectable } from '@nestjs/common';
import { AccessClaims, JwtService, peekJwt, TokenVerificationError } from '../../../shared/crypto/jwt.service';
import { UUID } from '../../../shared/uuid';

/** The precise reasons of spec 4.3, recorded only in the audit event (`subject_invalid_reason`). */
export type SubjectInvalidReason =
  | 'malformed'
  | 'bad_signature'
  | 'wrong_issuer'
  | 'wrong_audience'
  | 'expired'
  | 'not_yet_valid'
  | 'missing_claims'
  | 'tenant_mismatch'
  | 'm2m_token'
  | 'already_delegated'
  | 'anonymous_token'
  | 'impersonated_token'
  | 'session_revoked'
  /** the session is live but past SESSION_MAX_AGE_SECONDS: it issues no more tokens */
  | 'session_max_age'
  /** the tenant requires MFA and the user's enrollment grace is over (spec 2.8) */
  | 'mfa_enrollment_required'
  | 'token_revoked'
  | 'agent_revoked_by_user';

/** Reasons answered as "Subject token revoked" rather than "Subject token invalid". */
const REVOKED: ReadonlySet<SubjectInvalidReason> = new Set(['session_revoked', 'token_revoked', 'agent_revoked_by_user']);

/** A subject token refused by spec 4.3; the response carries only the generic description. */
export class SubjectTokenRejected extends Error {
  constructor(
    readonly reason: SubjectInvalidReason,
    /** jti of the presented token when it could be read (only its hash prefix is recorded) */
    readonly jti?: string,
    /** the user, once the token is verified and of the client's tenant */
    readonly userId?: string,
  ) {
    super(reason);
  }

  get description(): string {
    return REVOKED.has(this.reason) ? 'Subject token revoked' : 'Subject token invalid';
  }
}

function verificationReason(message: string): SubjectInvalidReason {
  if (/claims missing/.test(message)) return 'missing_claims';
  if (/expired/.test(message)) return 'expired';
  if (/not active/.test(message)) return 'not_yet_valid';
  if (/issuer invalid/.test(message)) return 'wrong_issuer';
  if (/audience invalid/.test(message)) return 'wrong_audience';
  if (/malformed|bad header|invalid token|must be/.test(message)) return 'malformed';
  if (/invalid (exp|nbf|iat)/.test(message)) return 'missing_claims';
  return 'bad_signature'; // invalid signature, unknown kid, signature required, invalid algorithm
}

/**
 * The `jti` of a token read without verifying it (RFC 7519 decode only), for audit hash prefixes
 * of refusals that happen before or without verification; undefined when it cannot be read.
 * Never a basis for any decision: only its hash prefix is recorded.
 */
export function unverifiedJti(token: string | undefined): string | undefined {
  if (!token) return undefined;
  const jti = peekJwt(token)?.payload.jti;
  return typeof jti === 'string' && jti ? jti.slice(0, 200) : undefined;
}

/**
 * The stateless checks of spec 4.3 on a subject token (RFC 8693 section 2.1 `subject_token`):
 * an RS256 user access token of ours (signature, iss, aud, exp) of the client's tenant, not M2M,
 * not already delegated, not anonymous, not impersonated. Revocation is checked by the caller.
 */
@Injectable()
export class SubjectTokenValidator {
  constructor(private readonly jwt: JwtService) {}

  async validate(token: string, tenantId: string): Promise<AccessClaims> {
    let claims: AccessClaims;
    try {
      claims = await this.jwt.verify(token, { audience: this.jwt.audience });
    } catch (e) {
      if (!(e instanceof TokenVerificationError)) throw e;
      // an unverified `sub` names nobody: the audit record gets no target user
      throw new SubjectTokenRejected(verificationReason(e.message), unverifiedJti(token));
    }
    const jti = typeof claims.jti === 'string' ? claims.jti : undefined;
    const sub = typeof claims.sub === 'string' && UUID.test(claims.sub) ? claims.sub : undefined;
    const reject = (reason: SubjectInvalidReason) => new SubjectTokenRejected(reason, jti, sub);
    if (!jti || !sub || typeof claims.tenant_id !== 'string' || typeof claims.iat !== 'number') throw reject('missing_claims');
    // the delegated token is built from these: a subject token without them is not one of ours
    if (typeof claims.scope !== 'string' || !Array.isArray(claims.amr) || claims.amr.some((m) => typeof m !== 'string')) throw reject('missing_claims');
    // another tenant's user id stays out of this tenant's audit log
    if (claims.tenant_id !== tenantId) throw new SubjectTokenRejected('tenant_mismatch', jti);
    if (claims.m2m !== undefined && claims.m2m !== false) throw reject('m2m_token');
    if (claims.act !== undefined) throw reject('already_delegated'); // no chain delegation
    if (claims.is_anonymous === true) throw reject('anonymous_token');
    if (claims.is_anonymous !== false) throw reject('missing_claims');
    if (claims.imp !== undefined) throw reject('impersonated_token');
    // user tokens always name their session; without one nothing ties the token to a live sign-in
    if (typeof claims.sid !== 'string' || !UUID.test(claims.sid)) throw reject('missing_claims');
    return claims;
  }
}
