import { createParamDecorator, ExecutionContext } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import type { Slot } from '../cache/read-through.cache';
import { AccessClaims } from '../crypto/jwt.service';
import type { ChallengeScheme } from '../errors/app-error';

export interface ApiKeyPrincipal {
  id: string;
  tenantId: string;
  tenantSlug: string;
  tier: 'free' | 'pro' | 'enterprise';
  /** tenant settings every end-user endpoint needs, read in the same query as the key */
  tenant: {
    name: string;
    userScopes: string;
    defaultUserRole: string;
    anonymousSigninsEnabled: boolean;
    minorProtectionEnabled: boolean;
  };
}

export interface UserPrincipal {
  userId: string;
  tenantId: string;
  sessionId?: string;
  isAnonymous: boolean;
  claims: AccessClaims;
}

export interface Membership {
  tenant_id: string;
  tenant_slug: string;
  role: 'owner' | 'member';
}

export interface DashboardPrincipal {
  userId: string;
  email: string;
  sessionId: string;
  csrfToken: string;
  reauthAt: Date | null;
  memberships: Membership[];
  /** the tenant of `{slug}` in the path, once the membership check passed */
  tenant?: { id: string; slug: string; role: 'owner' | 'member' };
}

/** What the guards established about the caller, on `request.auth`. */
export interface AuthContext {
  /**
   * the credential the route authenticates its caller with, set by its guard before it checks
   * anything: the challenge of a 401 raised without one (challengeFor, the problem filter)
   */
  scheme?: ChallengeScheme;
  apiKey?: ApiKeyPrincipal;
  user?: UserPrincipal;
  dashboard?: DashboardPrincipal;
  /** Redis values the bearer guard read for the route (BearerPrefetch), by key */
  prefetched?: ReadonlyMap<string, string | null>;
  /** the cache read of the X-API-Key principal started before the guards ran (ApiKeyPrefetchGuard), or the settled lookup of the rate-limit guard (a per-key limit; it rejects with auth/invalid_api_key for an unknown or revoked key) */
  apiKeyLookup?: { keyHash: string; slot: Promise<Slot<ApiKeyPrincipal>> };
}

declare module 'fastify' {
  interface FastifyRequest {
    auth?: AuthContext;
  }
}

export function authOf(req: FastifyRequest): AuthContext {
  return (req.auth ??= {});
}

/** The API key principal set by ApiKeyGuard. */
export const CurrentApiKey = createParamDecorator((_: unknown, ctx: ExecutionContext) => authOf(ctx.switchToHttp().getRequest()).apiKey);
/** The end user set by BearerGuard (undefined under OptionalBearerGuard without a token). */
export const CurrentUser = createParamDecorator((_: unknown, ctx: ExecutionContext) => authOf(ctx.switchToHttp().getRequest()).user);
/** The dashboard session principal set by DashboardAuth. */
export const CurrentDashboard = createParamDecorator((_: unknown, ctx: ExecutionContext) => authOf(ctx.switchToHttp().getRequest()).dashboard);
/** Client address (derived under TRUST_PROXY) and user agent, for limits and hashed audit fields. */
export const ClientInfo = createParamDecorator((_: unknown, ctx: ExecutionContext) => {
  const req = ctx.switchToHttp().getRequest<FastifyRequest>();
  return { ip: req.ip, userAgent: String(req.headers['user-agent'] ?? '') } as ClientInfoValue;
});
export interface ClientInfoValue {
  ip: string;
  userAgent: string;
}
