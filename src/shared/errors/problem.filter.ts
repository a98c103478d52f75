import { ArgumentsHost, Catch, ExceptionFilter, Inject } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { APP_CONFIG, AppConfig } from '../../config/config';
import { renderError, sendRendered } from './problem';

/** The one global exception filter: every error leaves as problem+json (or RFC 6749 under /oauth). */
@Catch()
export class ProblemFilter implements ExceptionFilter {
  constructor(@Inject(APP_CONFIG) private readonly config: AppConfig) {}

  catch(exception: unknown, host: ArgumentsHost): void {
    const ctx = host.switchToHttp();
    const req = ctx.getRequest<FastifyRequest>();
    const reply = ctx.getResponse<FastifyReply>();
    const rendered = renderError(exception, req.url, String(req.id));
    if (rendered.status === 429 && !rendered.headers['X-Service-Docs'])
      rendered.headers['X-Service-Docs'] = this.config.RATE_LIMIT_DOCS_URL;
    sendRendered(reply, rendered);
  }
}
