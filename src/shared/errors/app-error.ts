import { countRateLimited } from '../http/metrics';
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

/**
 * 429 with the Retry-After the limiter computed. Every 429 of the API is one of these, made where
 * it is decided and thrown at once, so it is counted here, in authp_rate_limited_total by
 * `limiter` (a fixed name in code: a rule's bucket, `failed_sign_in:<realm kind>`, `mail-ip`, ...;
 * never a key or subject), and no refusal can go uncounted.
 */
export class RateLimitedError extends AppError {
  constructor(
    readonly limiter: string,
    readonly retryAfterSeconds: number,
    code: ErrorCode = 'rate_limit/exceeded',
  ) {
    super(code, `Too many requests; retry after ${retryAfterSeconds} seconds`, {
      headers: { 'Retry-After': String(Math.max(1, Math.ceil(retryAfterSeconds))) },
      status: 429,
    });
    countRateLimited(limiter);
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

/**
 * A quoted-string parameter of a challenge (RFC 9110 section 11.2; RFC 6750 section 3 limits
 * `error_description` to %x20-21 / %x23-5B / %x5D-7E): the text without `"`, `\` and anything
 * outside printable ASCII.
 */
const challengeText = (text: string): string => text.replace(/["\\]|[^\x20-\x7e]/g, '');

/**
 * A bearer route refusing an otherwise valid token for lack of privilege (an agent's delegated
 * token where only the user's own token may act, a guest's where guests are refused, a token
 * without the session or account the action needs): 403 auth/forbidden (the problem body as ever)
 * with the RFC 6750 section 3.1 challenge `Bearer error="insufficient_scope"`, so a standard
 * OAuth client (oauth4webapi, openid-client: WWWAuthenticateChallengeError) tells it from an
 * invalid token (401) without reading the problem code. Every `auth/forbidden` of a bearer route
 * is made here; the dashboard's cookie routes, which take no bearer, refuse with a plain AppError.
 */
export function insufficientScope(detail: string): AppError {
  return new AppError('auth/forbidden', detail, {
    headers: { 'WWW-Authenticate': `Bearer error="insufficient_scope", error_description="${challengeText(detail)}"` },
  });
}

/**
 * The bearer's latest proof of the account is older than the route allows (StepUpGuard): 403
 * auth/step_up_required with the RFC 9470 section 3 challenge
 * `Bearer error="insufficient_user_authentication"` and `max_age` (the seconds the route accepts
 * since that proof), so a standard client knows to step up and retry.
 *
 * Not used for 403 `mfa/enrollment_required` (sign-in and refresh under a tenant MFA policy, and
 * a passwordless step-up completed by an account the policy holds): those are X-API-Key routes,
 * or a refusal whose remedy is not a fresher authentication of the presented token but TOTP
 * enrollment with the `enrollment_token` the problem body carries; an
 * `insufficient_user_authentication` challenge would send a standard client to re-authenticate
 * at an authorization endpoint, which would refuse it the same way. A 403 needs no challenge
 * (RFC 9110 section 15.5.4), so none is sent.
 */
export function stepUpRequired(detail: string, maxAgeSeconds: number): AppError {
  return new AppError('auth/step_up_required', detail, {
    headers: {
      'WWW-Authenticate': `Bearer error="insufficient_user_authentication", error_description="${challengeText(detail)}", max_age=${Math.max(0, Math.floor(maxAgeSeconds))}`,
    },
  });
}

/** The credential a route authenticates its caller with (recorded on the request by its guard). */
export type ChallengeScheme = 'bearer' | 'api-key' | 'dashboard';

/**
 * The WWW-Authenticate of a 401 that carries no challenge of its own (RFC 9110 section 15.5.2:
 * every 401 carries one), added by the problem filter. One rule: the challenge names the
 * credential the ROUTE authenticates its caller with, whichever credential of the request failed
 * (an API key, a password, a one-time code, a refresh token, an MFA challenge token):
 * - a bearer route: `Bearer realm="api"`; an X-API-Key beside the token that is unknown or
 *   revoked refuses the pair as `tenantMismatch()` does (`error="invalid_token"`,
 *   `error_description="invalid_api_key"`). A password or code the body got wrong gets the bare
 *   challenge: no RFC 6750 error code fits a credential other than the token (the token itself
 *   refused is InvalidTokenError's `error="invalid_token"`);
 * - an X-API-Key route (register, login, anonymous sign-in, refresh, MFA and passwordless
 *   sign-in): `ApiKey realm="api"`, also for a wrong password or a dead refresh token: the
 *   request's authentication scheme stays the API key, the body's credential is the grant;
 * - a dashboard route (cookie session, its sign-in and invitation acceptance included: the filter
 *   knows those by their /v1/auth/dashboard/ path): `Cookie realm="dashboard"` (the scheme of
 *   draft-broyer-http-cookie-auth).
 * `ApiKey` and `Cookie` are not registered schemes; RFC 9110 asks only for a challenge
 * applicable to the resource, and neither makes a browser prompt for Basic credentials. A route
 * that recorded no scheme is an end-user route under /v1/auth (contract "Tenant resolution":
 * X-API-Key), so ApiKey. The /oauth endpoints answer in their RFC 6749 envelope (Basic
 * challenge on invalid_client) and are left alone.
 */
export function challengeFor(scheme: ChallengeScheme | undefined, code: string): string {
  if (scheme === 'bearer') return code === 'auth/invalid_api_key' ? 'Bearer error="invalid_token", error_description="invalid_api_key"' : 'Bearer realm="api"';
  if (scheme === 'dashboard') return 'Cookie realm="dashboard"';
  return 'ApiKey realm="api"';
}
