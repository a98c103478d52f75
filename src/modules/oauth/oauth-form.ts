import { createParamDecorator, ExecutionContext } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import { OAuthError } from '../../shared/errors/oauth-error';

const FORM_TYPE = /^application\/x-www-form-urlencoded\s*(;|$)/i;

/**
 * The parameters of an OAuth request body (application/x-www-form-urlencoded only, RFC 6749
 * section 3.2). An empty value counts as omitted (RFC 6749 section 3.1); a parameter repeated
 * where the RFC allows one value is invalid_request, empty repeats included (`token=X&token=`);
 * unrecognized parameters are ignored.
 */
export class FormParams {
  private constructor(private readonly values: ReadonlyMap<string, readonly string[]>) {}

  /** Parses the body Fastify produced for the request; anything but a form is invalid_request. */
  static fromRequest(req: FastifyRequest): FormParams {
    const type = req.headers['content-type'];
    if (typeof type !== 'string' || !FORM_TYPE.test(type) || !req.body || typeof req.body !== 'object') {
      throw new OAuthError('invalid_request', 'The request body must be application/x-www-form-urlencoded');
    }
    return FormParams.of(req.body as Record<string, unknown>);
  }

  /** From parsed values (the body parser's, or a caller's). */
  static of(values: Record<string, unknown>): FormParams {
    const map = new Map<string, string[]>();
    for (const [k, v] of Object.entries(values)) {
      const list = (Array.isArray(v) ? v : [v]).filter((x): x is string => typeof x === 'string');
      if (list.length) map.set(k, list);
    }
    return new FormParams(map);
  }

  /** A single-valued parameter: undefined when absent or empty, invalid_request when repeated. */
  get(name: string): string | undefined {
    const list = this.values.get(name);
    if (!list) return undefined;
    if (list.length > 1) throw new OAuthError('invalid_request', `Parameter ${name} must not be repeated`);
    return list[0] === '' ? undefined : list[0];
  }

  /** A parameter RFC 8693 lets repeat (audience): its non-empty values. */
  all(name: string): readonly string[] {
    return (this.values.get(name) ?? []).filter((v) => v !== '');
  }

  /** Whether the parameter has a non-empty value. */
  has(name: string): boolean {
    return this.all(name).length > 0;
  }
}

/** The form parameters of an /oauth/* request (400 invalid_request for any other content type). */
export const OAuthForm = createParamDecorator((_: unknown, ctx: ExecutionContext) => FormParams.fromRequest(ctx.switchToHttp().getRequest<FastifyRequest>()));
