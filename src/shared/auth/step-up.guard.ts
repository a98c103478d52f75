import { applyDecorators, CanActivate, ExecutionContext, Injectable, SetMetadata, Type, UseGuards } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { ApiBearerAuth } from '@nestjs/swagger';
import type { FastifyRequest } from 'fastify';
import type { AccessClaims } from '../crypto/jwt.service';
import { insufficientScope, stepUpRequired } from '../errors/app-error';
import { authOf } from './auth-context';
import { BearerGuard } from './guards';

const STEP_UP = 'authp:step-up';

/**
 * A route's own rule for some tokens its authentication admits (e.g. MFA's enrollment-only token):
 * how old their proof may be, and what the refusal says; undefined for every other token.
 */
export type ProofRule = (claims: AccessClaims, maxAge: number) => { maxAge: number; refusal: string } | undefined;

/** What a route requires of the bearer's latest proof of the account. */
interface StepUpRule {
  maxAge: number;
  /** a sign-in (`auth_time`) as recent counts as well as a step-up */
  orSignIn: boolean;
  proofRule?: ProofRule;
}

/**
 * spec 2.5: the bearer's access token must carry `step_up_at` (NumericDate) no older than the
 * route's limit (or, where the route says so, an `auth_time` that recent: a sign-in proved the
 * account just as well); otherwise 403 auth/step_up_required (the client steps up and retries),
 * with the RFC 9470 challenge `Bearer error="insufficient_user_authentication", max_age=<limit>`
 * (stepUpRequired): the limit that applied to this token, the route's or its ProofRule's.
 * An agent token (`act`) or a guest's can never step up (the step-up routes refuse them), so a
 * route needing a step-up refuses them for what they are, 403 auth/forbidden with RFC 6750's
 * `insufficient_scope`, as every bearer route refusing them does: a challenge to step up would
 * send an RFC 9470 client round a loop.
 */
@Injectable()
export class StepUpGuard implements CanActivate {
  constructor(private readonly reflector: Reflector) {}

  canActivate(ctx: ExecutionContext): boolean {
    const { maxAge, orSignIn, proofRule } = this.reflector.get<StepUpRule>(STEP_UP, ctx.getHandler()) ?? { maxAge: 300, orSignIn: false };
    const user = authOf(ctx.switchToHttp().getRequest<FastifyRequest>()).user;
    const claims = user?.claims;
    if (claims?.act) throw insufficientScope('Delegated (agent) tokens cannot step up; use the user\'s own token');
    if (user?.isAnonymous) throw insufficientScope('Guests cannot step up; register first');
    const proofs = claims ? [claims.step_up_at, ...(orSignIn ? [claims.auth_time] : [])].map(Number) : [];
    const own = claims && proofRule?.(claims, maxAge);
    const limit = own ? own.maxAge : maxAge;
    if (!proofs.some((at) => Number.isFinite(at) && Date.now() / 1000 - at <= limit)) {
      const how = orSignIn ? 'Sign in or re-verify (step-up)' : 'Re-verify (step-up)';
      throw stepUpRequired(own ? own.refusal : `${how} within the last ${limit} seconds first`, limit);
    }
    return true;
  }
}

export interface StepUpOptions {
  /** a sign-in no older than the limit (the token's `auth_time`) counts as well */
  orSignIn?: boolean;
  /** the route's authentication, run before the check (default: a regular bearer token) */
  auth?: Type<CanActivate>;
  /** the route's own rule for some tokens its authentication admits (see ProofRule) */
  proofRule?: ProofRule;
}

/** Bearer authentication plus a step-up no older than `maxAgeSeconds`. */
export const RequireStepUp = (maxAgeSeconds = 300, { orSignIn = false, auth = BearerGuard, proofRule }: StepUpOptions = {}) =>
  applyDecorators(SetMetadata(STEP_UP, { maxAge: maxAgeSeconds, orSignIn, proofRule } satisfies StepUpRule), UseGuards(auth, StepUpGuard), ApiBearerAuth());
