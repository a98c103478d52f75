import { applyDecorators, CanActivate, ExecutionContext, Injectable, SetMetadata, Type, UseGuards } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { ApiBearerAuth } from '@nestjs/swagger';
import type { FastifyRequest } from 'fastify';
import { AppError } from '../errors/app-error';
import { authOf } from './auth-context';
import { BearerGuard } from './guards';

const STEP_UP = 'authp:step-up';

/** What a route requires of the bearer's latest proof of the account. */
interface StepUpRule {
  maxAge: number;
  /** a sign-in (`auth_time`) as recent counts as well as a step-up */
  orSignIn: boolean;
}

/**
 * spec 2.5: the bearer's access token must carry `step_up_at` (NumericDate) no older than the
 * route's limit (or, where the route says so, an `auth_time` that recent: a sign-in proved the
 * account just as well); otherwise 403 auth/step_up_required (the client steps up and retries).
 */
@Injectable()
export class StepUpGuard implements CanActivate {
  constructor(private readonly reflector: Reflector) {}

  canActivate(ctx: ExecutionContext): boolean {
    const { maxAge, orSignIn } = this.reflector.get<StepUpRule>(STEP_UP, ctx.getHandler()) ?? { maxAge: 300, orSignIn: false };
    const claims = authOf(ctx.switchToHttp().getRequest<FastifyRequest>()).user?.claims;
    const proofs = claims ? [claims.step_up_at, ...(orSignIn ? [claims.auth_time] : [])].map(Number) : [];
    // an enrollment-only token (spec 2.8) is minted with the proof it records (a sign-in, a
    // step-up): it counts for its whole lifetime, as long as or longer than the route's limit. One
    // minted on a refresh records its session's sign-in, and only a recent one counts
    const enrollmentOnly = orSignIn && claims?.mfa_enrollment_only === true;
    const limit = enrollmentOnly ? Math.max(maxAge, Number(claims.exp) - Number(claims.iat) || 0) : maxAge;
    if (!proofs.some((at) => Number.isFinite(at) && Date.now() / 1000 - at <= limit)) {
      // an enrollment-only token cannot step up: its holder signs in again (a new one comes with it)
      const how = enrollmentOnly ? 'Sign in again: this enrollment-only token was not granted on a sign-in' : orSignIn ? 'Sign in or re-verify (step-up)' : 'Re-verify (step-up)';
      throw new AppError('auth/step_up_required', `${how} within the last ${limit} seconds first`);
    }
    return true;
  }
}

export interface StepUpOptions {
  /** a sign-in no older than the limit (the token's `auth_time`) counts as well */
  orSignIn?: boolean;
  /** the route's authentication, run before the check (default: a regular bearer token) */
  auth?: Type<CanActivate>;
}

/** Bearer authentication plus a step-up no older than `maxAgeSeconds`. */
export const RequireStepUp = (maxAgeSeconds = 300, { orSignIn = false, auth = BearerGuard }: StepUpOptions = {}) =>
  applyDecorators(SetMetadata(STEP_UP, { maxAge: maxAgeSeconds, orSignIn } satisfies StepUpRule), UseGuards(auth, StepUpGuard), ApiBearerAuth());
