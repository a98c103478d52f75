import { createParamDecorator, ExecutionContext, Type } from '@nestjs/common';
import { RouteConfig } from '@nestjs/platform-fastify';
import type { FastifyRequest } from 'fastify';
import { AccessClaims } from '../crypto/jwt.service';
import { authOf } from './auth-context';

/**
 * A provider that names Redis keys a route's handler will read for the caller of a verified token.
 * The bearer guard reads them in the same MGET as its revocation check, so a hot bearer route
 * (GET /v1/auth/me) makes one Redis round trip instead of two. Reading early is safe only for
 * plain reads: the guard never writes, and a refused token's values are dropped unread.
 */
export interface BearerPrefetchSource {
  prefetchKeys(claims: AccessClaims): string[];
}

const CONFIG_KEY = 'bearerPrefetch';

/** Route decorator: the bearer guard prefetches `source`'s keys for this route. */
export const BearerPrefetch = (source: Type<BearerPrefetchSource>) => RouteConfig({ [CONFIG_KEY]: source });

/** The prefetch source a route declared, if any. */
export function bearerPrefetchSource(req: FastifyRequest): Type<BearerPrefetchSource> | undefined {
  return (req.routeOptions?.config as unknown as Record<string, Type<BearerPrefetchSource> | undefined> | undefined)?.[CONFIG_KEY];
}

/** What the guard read: key -> value (null when the key is absent); undefined when nothing was prefetched. */
export type Prefetched = ReadonlyMap<string, string | null>;

export const BearerPrefetched = createParamDecorator((_: unknown, ctx: ExecutionContext): Prefetched | undefined =>
  authOf(ctx.switchToHttp().getRequest<FastifyRequest>()).prefetched,
);
