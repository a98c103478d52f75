import { applyDecorators, CanActivate, ExecutionContext, Injectable, SetMetadata, Type, UseGuards } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { ApiBearerAuth } from '@nestjs/swagger';
import type { FastifyRequest } from 'fastify';
import { AppError } from '../errors/app-error';
import { authOf } from './auth-context';
import { BearerGuard } from './guards';

const STEP_UP = 'authp:step-up';
/** How far apart a token's issue time and the proof it records may be for it to count as minted with that proof. */
const PROOF_MINT_SLACK_SECONDS = 5;

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
    // an enrollment-only token (spec 2.8) minted with the proof it records (a sign-in, a step-up:
    // the proof's time is its issue time) is that proof: it counts for its whole lifetime, as long
    // as or longer than the route's limit. One minted later (on a refresh: its session's sign-in)
    // has the route's limit
    const enrollmentOnly = orSignIn && claims?.mfa_enrollment_only === true;
    const iat = Number(claims?.iat);
    const mintedWithProof = enrollmentOnly && proofs.some((at) => Math.abs(iat - at) <= PROOF_MINT_SLACK_SECONDS);
    const limit = mintedWithProof ? Math.max(maxAge, Number(claims?.exp) - iat || 0) : maxAge;
    if (!proofs.some((at) => Number.isFinite(at) && Date.now() / 1000 - at <= limit)) {
      // an enrollment-only token cannot step up: its holder signs in again (a new one comes with it)
      const how = enrollmentOnly ? 'Sign in again: this enrollment-only token' : orSignIn ? 'Sign in or re-verify (step-up)' : 'Re-verify (step-up)';
      throw new AppError('auth/step_up_required', enrollmentOnly ? `${how} was not granted on a sign-in of the last ${limit} seconds` : `${how} within the last ${limit} seconds first`);
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
