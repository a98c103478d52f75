import { CanActivate, ExecutionContext, Inject, Injectable } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import type { FastifyRequest } from 'fastify';
import { APP_CONFIG, AppConfig } from '../../config/config';
import { RateLimitedError } from '../errors/app-error';
import { hashPrefix } from '../crypto/tokens';
import { RATE_LIMIT_RULES, RateLimitRule } from './rate-limit.decorator';
import { RateLimitService } from './rate-limit.service';
import { addressKey } from './address-key';

/** Enforces the @RateLimit rules of a route; every rule counts, the longest wait is reported. */
@Injectable()
export class RateLimitGuard implements CanActivate {
  constructor(
    private readonly reflector: Reflector,
    private readonly limiter: RateLimitService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  canActivate(ctx: ExecutionContext): boolean | Promise<boolean> {
    const rules = this.reflector.get<RateLimitRule[] | undefined>(RATE_LIMIT_RULES, ctx.getHandler());
    // most routes have no rule: answered at once, without a promise per request
    return rules?.length ? this.enforce(ctx, rules) : true;
  }

  private async enforce(ctx: ExecutionContext, rules: RateLimitRule[]): Promise<boolean> {
    const req = ctx.switchToHttp().getRequest<FastifyRequest>();
    const results = await Promise.all(
      rules.map(async (rule) => {
        const subject = rule.by === 'ip' ? addressKey(req.ip) : hashPrefix(String(req.headers['x-api-key'] ?? ''));
        const r = await this.limiter.hit(rule.bucket, `${rule.by}:${subject}`, rule.limit(this.config), rule.windowSeconds);
        return { rule, r };
      }),
    );
    const blocked = results.filter((x) => !x.r.allowed);
    if (blocked.length) {
      const worst = blocked.reduce((a, b) => (b.r.retryAfterSeconds > a.r.retryAfterSeconds ? b : a));
      throw new RateLimitedError(worst.r.retryAfterSeconds, worst.rule.code);
    }
    return true;
  }
}
