import { applyDecorators, CanActivate, ExecutionContext, Injectable, UseGuards } from '@nestjs/common';
import { ApiBearerAuth } from '@nestjs/swagger';
import type { FastifyRequest } from 'fastify';
import { ApiKeyResolver } from '../../shared/auth/api-key.strategy';
import { authOf, UserPrincipal } from '../../shared/auth/auth-context';
import { BearerAuthenticator, bearerToken } from '../../shared/auth/bearer.strategy';
import { TokenRevocationService } from '../../shared/auth/token-revocation.service';
import { peekJwt } from '../../shared/crypto/jwt.service';
import { bearerRequired, insufficientScope, InvalidTokenError, tenantMismatch } from '../../shared/errors/app-error';
import { EnrollmentTokenService } from './enrollment-token.service';

/**
 * Bearer authentication of TOTP setup and verify-setup: a regular user access token (verified by
 * the kernel's BearerAuthenticator), or an enrollment-only token (spec 2.8), which no other
 * endpoint accepts. Guests and agent (delegated) tokens cannot enroll.
 */
@Injectable()
export class MfaEnrollmentGuard implements CanActivate {
  constructor(
    private readonly bearer: BearerAuthenticator,
    private readonly enrollment: EnrollmentTokenService,
    private readonly apiKeys: ApiKeyResolver,
    private readonly revocation: TokenRevocationService,
  ) {}

  async canActivate(ctx: ExecutionContext): Promise<boolean> {
    const req = ctx.switchToHttp().getRequest<FastifyRequest>();
    authOf(req).scheme = 'bearer';
    const token = bearerToken(req);
    if (!token) throw bearerRequired();
    let user: UserPrincipal;
    if (peekJwt(token)?.payload.aud === this.enrollment.audience) {
      const claims = await this.enrollment.verify(token);
      if (!claims) throw new InvalidTokenError();
      // a password reset or change, or sign-out everywhere, since it was issued ends it
      if (!(await this.enrollment.granted(claims))) throw new InvalidTokenError();
      // the same revocation checks as every bearer (e.g. a jti revoked through /oauth/revoke)
      const reason = await this.revocation.revokedReason(claims);
      if (reason) throw new InvalidTokenError(reason === 'session_revoked' ? 'invalid_token' : reason);
      const header = req.headers['x-api-key'];
      if (header) {
        const key = await this.apiKeys.resolve(String(header), req);
        if (key.tenantId !== claims.tenant_id) throw tenantMismatch();
        authOf(req).apiKey = key;
      }
      user = { userId: claims.sub, tenantId: claims.tenant_id, sessionId: claims.sid, isAnonymous: false, claims };
      authOf(req).user = user;
    } else {
      user = await this.bearer.authenticate(req, token);
    }
    if (user.isAnonymous) throw insufficientScope('Guests cannot enroll in MFA; register first');
    if (user.claims.act) throw insufficientScope('Delegated (agent) tokens cannot manage MFA');
    return true;
  }
}

/** Bearer auth that also admits the enrollment-only token (verify-setup; setup adds the step-up check, RequireStepUp). */
export const MfaEnrollmentAuth = () => applyDecorators(UseGuards(MfaEnrollmentGuard), ApiBearerAuth());
