import { ERROR_CATALOG, ErrorCode } from './error-codes';

export interface FieldError {
  field: string;
  message: string;
}

/**
 * Before constructing an error of `status`: a client error (4xx) captures no stack trace. Returns
 * the limit to restore right after the constructor (AppError, OAuthError).
 */
export function withoutClientErrorStack(status: number): number {
  const limit = Error.stackTraceLimit;
  if (status < 500) Error.stackTraceLimit = 0;
  return limit;
}

/**
 * A failure with a stable code from the catalog; the problem+json filter serializes it. A client
 * error (4xx) carries no stack trace: nothing reads one, and capturing it was the largest single
 * cost of a refused request (4% of the API's CPU in a flood of bad refresh requests, profiled).
 */
export interface AppErrorOptions {
  errors?: FieldError[];
  headers?: Record<string, string>;
  status?: number;
  /** RFC 9457 section 3.2 extension members added to the problem body (never override its standard members) */
  extensions?: Record<string, unknown>;
  /** a server error already logged where it arose (the filter does not log it again) */
  logged?: boolean;
}

export class AppError extends Error {
  readonly status: number;
  readonly title: string;
  readonly options: AppErrorOptions;
  /**
   * `cause`: the failure behind this one (a Redis error behind server/unavailable), kept as the
   * standard, non-enumerable Error `cause`: the error log appends its message ("Rate limiter
   * unavailable: Command timed out") and its stack, never the response. Not kept in `options`,
   * which the log serializes whole.
   */
  constructor(
    readonly code: ErrorCode,
    readonly detail?: string,
    { cause, ...options }: AppErrorOptions & { cause?: unknown } = {},
  ) {
    const status = options.status ?? ERROR_CATALOG[code].status;
    const stackTraceLimit = withoutClientErrorStack(status);
    super(detail ?? ERROR_CATALOG[code].title, cause === undefined ? undefined : { cause });
    Error.stackTraceLimit = stackTraceLimit;
    this.status = status;
    this.title = ERROR_CATALOG[code].title;
    this.options = options;
  }
}

/** 429 with the Retry-After the limiter computed. */
export class RateLimitedError extends AppError {
  constructor(
    readonly retryAfterSeconds: number,
    code: ErrorCode = 'rate_limit/exceeded',
  ) {
    super(code, `Too many requests; retry after ${retryAfterSeconds} seconds`, {
      headers: { 'Retry-After': String(Math.max(1, Math.ceil(retryAfterSeconds))) },
      status: 429,
    });
  }
}

/**
 * The 401 of bearer-authenticated endpoints (RFC 6750 section 3), also when a handler finds the
 * token's user or session gone: every such 401 carries the Bearer challenge.
 */
export class InvalidTokenError extends AppError {
  constructor(description = 'invalid_token', detail?: string) {
    const q = description.replace(/"/g, '');
    super('auth/invalid_token', detail, {
      headers: {
        'WWW-Authenticate':
          q === 'invalid_token'
            ? 'Bearer error="invalid_token"'
            : `Bearer error="invalid_token", error_description="${q}"`,
      },
    });
  }
}

/**
 * The 401 of a bearer-authenticated endpoint called without any Authorization header: the bare
 * Bearer challenge, with no error code (RFC 6750 section 3.1: a request that lacks any
 * authentication information gets no error information).
 */
export function bearerRequired(): AppError {
  return new AppError('auth/unauthorized', 'Authorization: Bearer <access token> is required', {
    headers: { 'WWW-Authenticate': 'Bearer realm="api"' },
  });
}

/**
 * A bearer token of one tenant presented with another tenant's X-API-Key: 401 auth/tenant_mismatch,
 * with the Bearer challenge every 401 of a bearer endpoint carries (RFC 6750 section 3, RFC 7235).
 */
export function tenantMismatch(): AppError {
  return new AppError('auth/tenant_mismatch', undefined, {
    headers: { 'WWW-Authenticate': 'Bearer error="invalid_token", error_description="tenant_mismatch"' },
  });
}
