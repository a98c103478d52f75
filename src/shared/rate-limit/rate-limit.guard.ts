import { CanActivate, ExecutionContext, Inject, Injectable, Type, ValidationPipe } from '@nestjs/common';
import { RouteParamtypes } from '@nestjs/common/enums/route-paramtypes.enum';
import { ROUTE_ARGS_METADATA } from '@nestjs/common/constants';
import { Reflector } from '@nestjs/core';
import type { FastifyRequest } from 'fastify';
import { APP_CONFIG, AppConfig } from '../../config/config';
import { RateLimitedError } from '../errors/app-error';
import { createValidationPipe } from '../errors/validation.pipe';
import { hashPrefix, sha256Hex } from '../crypto/tokens';
import { AppError } from '../errors/app-error';
import { ApiKeyResolver } from '../auth/api-key.strategy';
import { ApiKeyPrincipal, authOf } from '../auth/auth-context';
import type { Slot } from '../cache/read-through.cache';
import { RATE_LIMIT_RULES, RateLimitRule } from './rate-limit.decorator';
import { RateLimitService } from './rate-limit.service';
import { addressSubject } from './address-key';
import { ClientHasher } from '../crypto/client-hash';

/**
 * Enforces the @RateLimit rules of a route in their declared order: a rule is counted only when
 * the ones before it let the request through; of the rules that refuse (or are blocked already),
 * the longest wait is reported.
 *
 * Per-key rules (`by: 'api_key'`) count only a key that is real. This guard runs before the
 * route's API-key guard (global guards first), so it resolves the key itself, through the same
 * ApiKeyResolver: otherwise every made-up X-API-Key would leave a counter in Redis for the length
 * of the window, as many as an attacker cares to send. The rules before the first per-key rule
 * (per address) are counted first, in one Redis round trip that the API-key prefetch's cache read
 * shares, so a request they refuse costs no PostgreSQL query; only a request they let through
 * resolves its key (the cache read already made, PostgreSQL on a miss), then the rest of the
 * rules are counted in a second round trip. An unknown or revoked key counts in no per-key rule (the API-key guard answers it
 * 401 auth/invalid_api_key), a real one in `api_key:<hash prefix of the key>` as before. The
 * resolution is left on the request (AuthContext `apiKeyLookup`), so the API-key guard reads
 * neither the cache nor PostgreSQL again. A request refused by a rule before the per-key ones
 * reports that rule's wait only (the per-key counters are not looked at).
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
    private readonly apiKeys: ApiKeyResolver,
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
    const firstPerKey = applicable.findIndex((r) => r.by === 'api_key');
    if (firstPerKey < 0) {
      await this.count(req, applicable);
      return true;
    }
    await this.count(req, applicable.slice(0, firstPerKey));
    const key = await this.realApiKey(req);
    await this.count(req, key === undefined ? applicable.slice(firstPerKey).filter((r) => r.by !== 'api_key') : applicable.slice(firstPerKey), key);
    return true;
  }

  /** Counts `rules` in order (one Redis round trip); throws 429 with the longest wait when any refuses. `apiKey`: a resolved key. */
  private async count(req: FastifyRequest, rules: RateLimitRule[], apiKey?: string): Promise<void> {
    if (!rules.length) return;
    const results = await this.limiter.hitInOrder(
      rules.map((rule) => {
        const subject = rule.by === 'ip' ? addressSubject(this.hasher, req.ip) : hashPrefix(apiKey!);
        return { bucket: rule.bucket, key: `${rule.by}:${subject}`, limit: rule.limit(this.config), windowSeconds: rule.windowSeconds };
      }),
    );
    let worst: { rule: RateLimitRule; wait: number } | undefined;
    results.forEach((r, i) => {
      if (!r.allowed && (!worst || r.retryAfterSeconds > worst.wait)) worst = { rule: rules[i], wait: r.retryAfterSeconds };
    });
    if (worst) throw new RateLimitedError(worst.rule.bucket, worst.wait, worst.rule.code);
  }

  /**
   * The request's X-API-Key when it is a live key (ApiKeyResolver), else undefined. Either answer
   * is then left on the request as its settled key lookup, which the API-key guard uses instead of
   * reading the cache or PostgreSQL again: the principal, or (an unknown or revoked key) the same
   * auth/invalid_api_key it would have thrown. Other failures (PostgreSQL unreachable) are thrown,
   * as the API-key guard would have.
   */
  private async realApiKey(req: FastifyRequest): Promise<string | undefined> {
    const header = req.headers['x-api-key'];
    const key = Array.isArray(header) ? header[0] : header;
    let slot: Promise<Slot<ApiKeyPrincipal>>;
    let live: boolean;
    try {
      slot = Promise.resolve({ value: await this.apiKeys.resolve(key, req), guard: null });
      live = true;
    } catch (e) {
      if (!(e instanceof AppError && e.code === 'auth/invalid_api_key')) throw e;
      slot = Promise.reject(e);
      slot.catch(() => undefined); // a route that never reads it leaves no unhandled rejection
      live = false;
    }
    if (key) authOf(req).apiKeyLookup = { keyHash: sha256Hex(key), slot };
    return live ? key : undefined;
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
