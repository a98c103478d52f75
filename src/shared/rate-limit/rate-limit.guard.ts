import { CanActivate, ExecutionContext, Inject, Injectable, Type, ValidationPipe } from '@nestjs/common';
import { RouteParamtypes } from '@nestjs/common/enums/route-paramtypes.enum';
import { ROUTE_ARGS_METADATA } from '@nestjs/common/constants';
import { Reflector } from '@nestjs/core';
import type { FastifyRequest } from 'fastify';
import { APP_CONFIG, AppConfig } from '../../config/config';
import { RateLimitedError } from '../errors/app-error';
import { createValidationPipe } from '../errors/validation.pipe';
import { hashPrefix } from '../crypto/tokens';
import { RATE_LIMIT_RULES, RateLimitRule } from './rate-limit.decorator';
import { RateLimitService } from './rate-limit.service';
import { addressSubject } from './address-key';
import { ClientHasher } from '../crypto/client-hash';

/**
 * Enforces the @RateLimit rules of a route in their declared order, in one Redis round trip: a
 * rule is counted only when the ones before it let the request through; of the rules that refuse
 * (or are blocked already), the longest wait is reported.
 */
@Injectable()
export class RateLimitGuard implements CanActivate {
  /** the same validation as the global pipe, for rules counting valid bodies only */
  private readonly validation: ValidationPipe = createValidationPipe();
  private readonly bodyTypes = new WeakMap<object, Type | null>();

  constructor(
    private readonly reflector: Reflector,
    private readonly limiter: RateLimitService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly hasher: ClientHasher,
  ) {}

  canActivate(ctx: ExecutionContext): boolean | Promise<boolean> {
    const rules = this.reflector.get<RateLimitRule[] | undefined>(RATE_LIMIT_RULES, ctx.getHandler());
    // most routes have no rule: answered at once, without a promise per request
    return rules?.length ? this.enforce(ctx, rules) : true;
  }

  private async enforce(ctx: ExecutionContext, rules: RateLimitRule[]): Promise<boolean> {
    const req = ctx.switchToHttp().getRequest<FastifyRequest>();
    // an invalid body skips the rules that count valid bodies only; the pipe answers it 400 later
    // (after the route's own guards, as before)
    const applicable = rules.some((r) => r.validBodyOnly) && !(await this.bodyIsValid(ctx, req)) ? rules.filter((r) => !r.validBodyOnly) : rules;
    if (!applicable.length) return true;
    const results = await this.limiter.hitInOrder(
      applicable.map((rule) => {
        const subject = rule.by === 'ip' ? addressSubject(this.hasher, req.ip) : hashPrefix(String(req.headers['x-api-key'] ?? ''));
        return { bucket: rule.bucket, key: `${rule.by}:${subject}`, limit: rule.limit(this.config), windowSeconds: rule.windowSeconds };
      }),
    );
    let worst: { rule: RateLimitRule; wait: number } | undefined;
    results.forEach((r, i) => {
      if (!r.allowed && (!worst || r.retryAfterSeconds > worst.wait)) worst = { rule: applicable[i], wait: r.retryAfterSeconds };
    });
    if (worst) throw new RateLimitedError(worst.wait, worst.rule.code);
    return true;
  }

  /** Whether the request body passes the validation the global pipe will run on the route's @Body(). */
  private async bodyIsValid(ctx: ExecutionContext, req: FastifyRequest): Promise<boolean> {
    const metatype = this.bodyType(ctx);
    if (!metatype) return true;
    try {
      await this.validation.transform(req.body, { type: 'body', metatype });
      return true;
    } catch {
      return false;
    }
  }

  private bodyType(ctx: ExecutionContext): Type | null {
    const handler = ctx.getHandler();
    let t = this.bodyTypes.get(handler);
    if (t === undefined) {
      const args = (Reflect.getMetadata(ROUTE_ARGS_METADATA, ctx.getClass(), handler.name) ?? {}) as Record<string, { index: number; data?: unknown }>;
      const entry = Object.entries(args).find(([k, v]) => k.split(':')[0] === String(RouteParamtypes.BODY) && v.data === undefined);
      const types = (Reflect.getMetadata('design:paramtypes', ctx.getClass().prototype, handler.name) ?? []) as Type[];
      t = entry ? (types[entry[1].index] ?? null) : null;
      this.bodyTypes.set(handler, t);
    }
    return t;
  }
}
