import { applyDecorators, CanActivate, ExecutionContext, Injectable, SetMetadata, UseGuards } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { ApiBearerAuth } from '@nestjs/swagger';
import type { FastifyRequest } from 'fastify';
import { AppError } from '../errors/app-error';
import { authOf } from './auth-context';
import { BearerGuard } from './guards';

const STEP_UP_MAX_AGE = 'authp:step-up-max-age';

/**
 * spec 2.5: the bearer's access token must carry `step_up_at` (NumericDate) no older than the
 * route's limit; otherwise 403 auth/step_up_required (the client steps up and retries).
 */
@Injectable()
export class StepUpGuard implements CanActivate {
  constructor(private readonly reflector: Reflector) {}

  canActivate(ctx: ExecutionContext): boolean {
    const maxAge = this.reflector.get<number>(STEP_UP_MAX_AGE, ctx.getHandler()) ?? 300;
    const user = authOf(ctx.switchToHttp().getRequest<FastifyRequest>()).user;
    const at = Number(user?.claims.step_up_at);
    if (!user || !Number.isFinite(at) || Date.now() / 1000 - at > maxAge) {
      throw new AppError('auth/step_up_required', `Re-verify (step-up) within the last ${maxAge} seconds first`);
    }
    return true;
  }
}

/** Bearer authentication plus a step-up no older than `maxAgeSeconds`. */
export const RequireStepUp = (maxAgeSeconds = 300) =>
  applyDecorators(SetMetadata(STEP_UP_MAX_AGE, maxAgeSeconds), UseGuards(BearerGuard, StepUpGuard), ApiBearerAuth());
