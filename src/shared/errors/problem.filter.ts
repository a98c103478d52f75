import { ArgumentsHost, Catch, ExceptionFilter, Inject, NotFoundException } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { APP_CONFIG, AppConfig } from '../../config/config';
import { AppError, challengeFor } from './app-error';
import { isOAuthPath, renderError, sendRendered } from './problem';
import { PUBLIC_DOCUMENTS_PREFIX } from '../http/public-cors';

/** The one global exception filter: every error leaves as problem+json (or RFC 6749 under /oauth). */
@Catch()
export class ProblemFilter implements ExceptionFilter {
  constructor(@Inject(APP_CONFIG) private readonly config: AppConfig) {}

  catch(exception: unknown, host: ArgumentsHost): void {
    const ctx = host.switchToHttp();
    const req = ctx.getRequest<FastifyRequest>();
    const reply = ctx.getResponse<FastifyReply>();
    const rendered = renderError(methodNotAllowed(exception, req) ?? exception, req.url, String(req.id));
    if (rendered.status === 429 && !rendered.headers['X-Service-Docs'])
      rendered.headers['X-Service-Docs'] = this.config.RATE_LIMIT_DOCS_URL;
    // RFC 9110 section 15.5.2: every 401 carries a challenge; one raised without its own gets the
    // route's (challengeFor). The /oauth endpoints keep RFC 6749's (Basic on invalid_client).
    if (rendered.status === 401 && !rendered.headers['WWW-Authenticate'] && !isOAuthPath(req.url))
      rendered.headers = { ...rendered.headers, 'WWW-Authenticate': challengeFor(req.auth?.scheme ?? dashboardPath(req.url), String(rendered.body.code)) };
    // under the public documents' prefix an error is as public as they are (a relying party's
    // browser reads the 404 of a document that does not exist, not a CORS failure)
    if (req.url.startsWith(PUBLIC_DOCUMENTS_PREFIX) && !reply.hasHeader('Access-Control-Allow-Origin')) rendered.headers['Access-Control-Allow-Origin'] = '*';
    sendRendered(reply, rendered);
  }
}

/**
 * The dashboard's routes that run no session guard (sign-in, invitation acceptance: they issue the
 * session cookie) record no scheme; their path names the dashboard.
 */
const dashboardPath = (url: string): 'dashboard' | undefined => (url.startsWith('/v1/auth/dashboard/') ? 'dashboard' : undefined);

const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;

/**
 * A path that exists, asked with a method it does not take: 405 with `Allow` (RFC 9110 section
 * 15.5.6) rather than the 404 of an unknown path. Only for requests no route matched.
 */
function methodNotAllowed(exception: unknown, req: FastifyRequest): AppError | undefined {
  if (!(exception instanceof NotFoundException) || req.routeOptions?.url !== undefined) return undefined;
  const path = req.url.split('?')[0];
  // an empty segment (`//`, a trailing `/`) can match a parametric route of another method with
  // an empty parameter, which no request could use: such a path is unknown, 404
  if (path.length > 1 && (path.includes('//') || path.endsWith('/'))) return undefined;
  const found = METHODS.filter((method) => method !== req.method && req.server.findRoute({ method, url: path }));
  // HEAD exists only beside GET (Fastify answers it from the GET route)
  const allow = found.filter((m) => m !== 'HEAD' || found.includes('GET'));
  if (!allow.length) return undefined;
  return new AppError('request/method_not_allowed', `${req.method} is not allowed on this path`, { headers: { Allow: allow.join(', ') } });
}
