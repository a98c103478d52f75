import { CanActivate, ExecutionContext, Injectable } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import { ApiKeyResolver } from '../../../shared/auth/api-key.strategy';
import { authOf } from '../../../shared/auth/auth-context';
import { BearerAuthenticator, bearerToken } from '../../../shared/auth/bearer.strategy';
import { AppError } from '../../../shared/errors/app-error';

/**
 * Register resolves the tenant from X-API-Key; a guest's bearer (to claim it) may come with the
 * key (tenants must match) or alone, in which case its tenant_id claim names the tenant.
 */
@Injectable()
export class RegisterAuthGuard implements CanActivate {
  constructor(
    private readonly apiKeys: ApiKeyResolver,
    private readonly bearer: BearerAuthenticator,
  ) {}

  async canActivate(ctx: ExecutionContext): Promise<boolean> {
    const req = ctx.switchToHttp().getRequest<FastifyRequest>();
    const token = bearerToken(req);
    if (token) {
      await this.bearer.authenticate(req, token); // also checks an X-API-Key of the same tenant
      return true;
    }
    const header = req.headers['x-api-key'];
    if (!header) throw new AppError('auth/invalid_api_key', 'X-API-Key is required');
    authOf(req).apiKey = await this.apiKeys.resolve(String(header), req);
    return true;
  }
}
