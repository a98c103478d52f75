import { CanActivate, ExecutionContext, Injectable } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import { ApiKeyResolver } from './api-key.strategy';

/**
 * The first global guard: starts the cache read of the X-API-Key principal (ApiKeyResolver
 * `prefetch`) and lets every request through. The rate-limit guard that follows issues its count
 * in the same tick, so both leave in one Redis write and the API-key guard finds the principal
 * read already. Refusing stays with the guards that decide: a request the rate limiter refuses
 * has cost one cache read more, never a PostgreSQL query.
 */
@Injectable()
export class ApiKeyPrefetchGuard implements CanActivate {
  constructor(private readonly resolver: ApiKeyResolver) {}

  canActivate(ctx: ExecutionContext): boolean {
    this.resolver.prefetch(ctx.switchToHttp().getRequest<FastifyRequest>());
    return true;
  }
}
