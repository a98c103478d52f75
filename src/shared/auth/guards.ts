import { applyDecorators, Injectable, UseGuards } from '@nestjs/common';
import { AuthGuard } from '@nestjs/passport';
import { ApiBearerAuth, ApiSecurity } from '@nestjs/swagger';
import { AppError } from '../errors/app-error';

function passthrough<T>(err: unknown, user: T): T {
  if (err) throw err;
  if (!user) throw new AppError('auth/unauthorized');
  return user;
}

/** X-API-Key: resolves the tenant; unknown or revoked key 401 auth/invalid_api_key. */
@Injectable()
export class ApiKeyGuard extends AuthGuard('api-key') {
  override handleRequest<T>(err: unknown, user: T): T {
    return passthrough(err, user);
  }
}

/** Authorization: Bearer <access token>; 401 with WWW-Authenticate on any failure. */
@Injectable()
export class BearerGuard extends AuthGuard('bearer') {
  override handleRequest<T>(err: unknown, user: T): T {
    return passthrough(err, user);
  }
}

/** A bearer when present (verified fully), nothing otherwise. */
@Injectable()
export class OptionalBearerGuard extends AuthGuard('optional-bearer') {
  override handleRequest<T>(err: unknown, user: T): T {
    return passthrough(err, user);
  }
}

export const ApiKeyAuth = () => applyDecorators(UseGuards(ApiKeyGuard), ApiSecurity('api_key'));
export const BearerAuth = () => applyDecorators(UseGuards(BearerGuard), ApiBearerAuth());
