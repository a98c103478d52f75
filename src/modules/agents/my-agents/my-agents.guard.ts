import { CanActivate, ExecutionContext, Inject, Injectable } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import { APP_CONFIG, AppConfig } from '../../../config/config';
import { authOf } from '../../../shared/auth/auth-context';
import { AppError, insufficientScope } from '../../../shared/errors/app-error';
import { RateLimitService } from '../../../shared/rate-limit/rate-limit.service';

/**
 * Runs after the bearer guard on /v1/users/me/agents*: the user's own token only (an agent
 * acting for the user must not restore itself or see the user's other agents), and the agents
 * API limits of spec 8 per user (RATE_LIMIT_AUTH_READ_MAX / RATE_LIMIT_AUTH_WRITE_MAX a minute).
 */
@Injectable()
export class MyAgentsGuard implements CanActivate {
  constructor(
    private readonly limiter: RateLimitService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  async canActivate(ctx: ExecutionContext): Promise<boolean> {
    const req = ctx.switchToHttp().getRequest<FastifyRequest>();
    const user = authOf(req).user;
    if (!user) throw new AppError('auth/unauthorized');
    if (user.claims.act) throw insufficientScope("Agent tokens cannot manage agents; use the user's own token");
    const write = req.method !== 'GET' && req.method !== 'HEAD';
    await this.limiter.enforce(
      write ? 'my-agents-write' : 'my-agents-read',
      `user:${user.userId}`,
      write ? this.config.RATE_LIMIT_AUTH_WRITE_MAX : this.config.RATE_LIMIT_AUTH_READ_MAX,
      60,
    );
    return true;
  }
}
