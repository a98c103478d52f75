import { AppError } from '../../shared/errors/app-error';
import { OAuthError } from '../../shared/errors/oauth-error';

/** Seconds a client is told to wait when Redis or PostgreSQL is unreachable. */
const UNAVAILABLE_RETRY_AFTER = '5';

/**
 * Fail closed (issue 4 item 3): a dependency the kernel reports unreachable (503
 * server/unavailable, e.g. Redis behind the rate limiter or the denylist) becomes the RFC 6749
 * `temporarily_unavailable` error with status 503; nothing is issued. Other errors pass through.
 * The AppError stays the OAuthError's `cause` (the standard, non-enumerable Error property): the
 * error filter logs the 503 with it (and its own cause, the Redis error), never in the response.
 */
export function failClosed(e: unknown): never {
  if (e instanceof AppError && e.status === 503) {
    throw new OAuthError('temporarily_unavailable', 'The service is temporarily unavailable; retry later', 503, { 'Retry-After': UNAVAILABLE_RETRY_AFTER }, e);
  }
  throw e;
}

/** 429 in the RFC 6749 envelope: `slow_down` (the RFC 8628 error for "too many requests") with Retry-After. */
export function slowDown(retryAfterSeconds: number, what: string): OAuthError {
  const s = Math.max(1, Math.ceil(retryAfterSeconds));
  return new OAuthError('slow_down', `Too many ${what}; retry after ${s} seconds`, 429, { 'Retry-After': String(s) });
}
