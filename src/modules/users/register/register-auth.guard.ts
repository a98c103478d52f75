import { CanActivate, ExecutionContext, Injectable } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import { ApiKeyResolver } from '../../../shared/auth/api-key.strategy';
import { authOf } from '../../../shared/auth/auth-context';
import { BearerAuthenticator, bearerToken } from '../../../shared/auth/bearer.strategy';
import { AppError } from '../../../shared/errors/app-error';

/**
 * Register resolves the tenant from X-API-Key (contract "Tenant resolution": end-user endpoints
 * under /v1/auth/*), with or without a guest's bearer to claim; a bearer sent with it must be of
 * the key's tenant (401 auth/tenant_mismatch). The key is checked first, so a request without one
 * is refused the same way whether or not it carries a token.
 */
@Injectable()
export class RegisterAuthGuard implements CanActivate {
  constructor(
    private readonly apiKeys: ApiKeyResolver,
    private readonly bearer: BearerAuthenticator,
  ) {}

  async canActivate(ctx: ExecutionContext): Promise<boolean> {
    const req = ctx.switchToHttp().getRequest<FastifyRequest>();
    authOf(req).scheme = 'api-key'; // Bearer once a guest's token is read (BearerAuthenticator)
    const header = req.headers['x-api-key'];
    if (!header) throw new AppError('auth/invalid_api_key', 'X-API-Key is required');
    const token = bearerToken(req);
    if (token) {
      await this.bearer.authenticate(req, token); // resolves the key too, and refuses one of another tenant
      return true;
    }
    authOf(req).apiKey = await this.apiKeys.resolve(String(header), req);
    return true;
  }
}
