import { CanActivate, ExecutionContext, Injectable } from '@nestjs/common';
import { ROUTE_ARGS_METADATA } from '@nestjs/common/constants';
import { RouteParamtypes } from '@nestjs/common/enums/route-paramtypes.enum';
import type { FastifyRequest } from 'fastify';
import { AppError } from '../errors/app-error';
import { isOAuthPath } from '../errors/problem';

/** Handlers that declare a @Body() parameter, by handler function (computed once each). */
const takesBody = new WeakMap<object, boolean>();

function declaresBody(ctx: ExecutionContext): boolean {
  const handler = ctx.getHandler();
  let known = takesBody.get(handler);
  if (known === undefined) {
    const args = (Reflect.getMetadata(ROUTE_ARGS_METADATA, ctx.getClass(), handler.name) ?? {}) as Record<string, unknown>;
    known = Object.keys(args).some((k) => k.split(':')[0] === String(RouteParamtypes.BODY));
    takesBody.set(handler, known);
  }
  return known;
}

/** An empty body, or `{}` (what many HTTP clients send for a POST without content). */
function isEmpty(body: unknown): boolean {
  return body === undefined || body === null || body === '' || (typeof body === 'object' && !Array.isArray(body) && Object.keys(body).length === 0);
}

/**
 * Endpoints that take no body (logout, DELETE, revoke, ...) refuse one with 400 request/invalid,
 * as every endpoint with a body refuses unknown properties (contract "Conventions"): a client
 * sending `{"everywhere": true}` to logout learns that nothing reads it. OAuth endpoints read
 * their form through their own decorator and are left to it.
 */
@Injectable()
export class NoBodyGuard implements CanActivate {
  canActivate(ctx: ExecutionContext): boolean {
    if (ctx.getType() !== 'http') return true;
    const req = ctx.switchToHttp().getRequest<FastifyRequest>();
    if (isEmpty(req.body) || declaresBody(ctx) || isOAuthPath(req.url)) return true;
    throw new AppError('request/invalid', 'This endpoint takes no request body', { errors: [{ field: 'body', message: 'this endpoint takes no request body' }] });
  }
}
