import { applyDecorators, CanActivate, ExecutionContext, Inject, Injectable, SetMetadata, UseGuards } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { ApiCookieAuth, ApiHeader, ApiParam } from '@nestjs/swagger';
import type { FastifyRequest } from 'fastify';
import { APP_CONFIG, AppConfig } from '../../config/config';
import { safeEqual } from '../crypto/tokens';
import { AppError } from '../errors/app-error';
import { RateLimitService } from '../rate-limit/rate-limit.service';
import { authOf } from './auth-context';
import { DASHBOARD_COOKIE, DashboardSessionService } from './dashboard-session.service';

interface DashboardAuthOptions {
  /** resolve `{slug}` against the session's memberships (no membership: 404) */
  tenant?: boolean;
  /**
   * owners only (members read, owners write): 403 auth/forbidden. `'or-self'`: also the member
   * the route's `{userId}` names, acting on themself (leaving the tenant)
   */
  owner?: boolean | 'or-self';
  /** re-authentication within DASHBOARD_REAUTH_MAX_AGE_SECONDS required */
  reauth?: boolean;
}

const DASHBOARD_AUTH = 'authp:dashboard-auth';
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * Dashboard session guard: cookie session, X-CSRF-Token on every state-changing request,
 * per-session read/write limits, tenant membership of `{slug}` and the owner role.
 */
@Injectable()
export class DashboardGuard implements CanActivate {
  constructor(
    private readonly reflector: Reflector,
    private readonly sessions: DashboardSessionService,
    private readonly limiter: RateLimitService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  async canActivate(ctx: ExecutionContext): Promise<boolean> {
    const opts = this.reflector.get<DashboardAuthOptions>(DASHBOARD_AUTH, ctx.getHandler()) ?? {};
    const req = ctx.switchToHttp().getRequest<FastifyRequest>();
    authOf(req).scheme = 'dashboard';
    const token = req.cookies?.[DASHBOARD_COOKIE];
    const session = token ? await this.sessions.find(token) : undefined;
    if (!session) throw new AppError('auth/unauthorized', 'Sign in to the dashboard first');
    const write = !SAFE_METHODS.has(req.method);
    if (write) {
      const header = req.headers['x-csrf-token'];
      if (typeof header !== 'string' || !safeEqual(header, session.csrfToken)) throw new AppError('csrf/invalid');
    }
    await this.limiter.enforce(
      write ? 'dash-write' : 'dash-read',
      `session:${session.sessionId}`,
      write ? this.config.RATE_LIMIT_AUTH_WRITE_MAX : this.config.RATE_LIMIT_AUTH_READ_MAX,
      60,
    );
    if (opts.tenant) {
      const slug = (req.params as Record<string, string>)?.slug;
      const m = session.memberships.find((x) => x.tenant_slug === slug);
      if (!m) throw new AppError('tenant/not_found');
      session.tenant = { id: m.tenant_id, slug: m.tenant_slug, role: m.role };
      // (a UUID in either case: the route's pipe reads it lower-cased, and the handler checks again)
      const self = opts.owner === 'or-self' && (req.params as Record<string, string>)?.userId?.toLowerCase() === session.userId.toLowerCase();
      if (opts.owner && !self && m.role !== 'owner') throw new AppError('auth/forbidden', 'Only tenant owners may do this');
    }
    if (opts.reauth) {
      const fresh = session.reauthAt && Date.now() - session.reauthAt.getTime() < this.config.DASHBOARD_REAUTH_MAX_AGE_SECONDS * 1000;
      if (!fresh) throw new AppError('auth/reauth_required', 'Confirm your password with /v1/auth/dashboard/reauth first');
    }
    authOf(req).dashboard = session;
    return true;
  }
}

/** Dashboard-session authentication for a route, with the options above. */
export function DashboardAuth(opts: DashboardAuthOptions = {}) {
  return applyDecorators(
    SetMetadata(DASHBOARD_AUTH, opts),
    UseGuards(DashboardGuard),
    ApiCookieAuth(DASHBOARD_COOKIE),
    ApiHeader({ name: 'X-CSRF-Token', required: true, description: 'required on state-changing requests' }), // reads: removed by csrfOnWrites
    ...(opts.tenant ? [ApiParam({ name: 'slug', type: String, description: 'tenant slug (a tenant the session is not a member of: 404 tenant/not_found)' })] : []),
  );
}
