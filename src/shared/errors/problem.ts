import { HttpException, Logger, ValidationError } from '@nestjs/common';
import { errorCodes } from 'fastify';
import type { FastifyReply } from 'fastify';
import { DatabaseError } from 'pg';
import { QueryFailedError } from 'typeorm';
import { AppError, FieldError } from './app-error';
import { ERROR_CATALOG, ErrorCode } from './error-codes';
import { OAuthError } from './oauth-error';

export interface ProblemBody {
  type: string;
  title: string;
  status: number;
  code: string;
  detail?: string;
  errors?: FieldError[];
  request_id?: string;
}

export interface RenderedError {
  status: number;
  headers: Record<string, string>;
  contentType: string;
  body: Record<string, unknown>;
}

const logger = new Logger('Errors');

/** What a database error may carry that repeats the request's values (a unique violation's `detail` names the key). */
const DATABASE_ERROR_VALUES = ['detail', 'where', 'parameters', 'query', 'driverError'] as const;

/**
 * An error as logged: a PostgreSQL (node-postgres) or TypeORM error without the fields that
 * repeat the values of the statement (emails, hashes, tokens a request sent); its SQLSTATE,
 * constraint, table and column stay, which is what a fix needs. Anything else as it is.
 */
export function loggableError(err: unknown): unknown {
  if (!(err instanceof DatabaseError || err instanceof QueryFailedError)) return err;
  const safe = Object.assign(Object.create(Object.getPrototypeOf(err) as object) as Error, err, { message: err.message, stack: err.stack });
  for (const key of DATABASE_ERROR_VALUES) delete (safe as unknown as Record<string, unknown>)[key];
  const cause = err instanceof QueryFailedError ? (err as { driverError?: unknown }).driverError : err.cause;
  if (cause !== undefined) Object.defineProperty(safe, 'cause', { value: loggableError(cause), enumerable: false, configurable: true, writable: true });
  return safe;
}

/** The OAuth endpoints (RFC 6749): form bodies, and errors in the RFC 6749 envelope instead of problem+json. */
export const OAUTH_PATH_PREFIX = '/oauth/';
/** Whether a request URL names an OAuth endpoint, as the router reads it (percent-decoded: `/%6fauth/token` is `/oauth/token`). */
export const isOAuthPath = (url: string): boolean => url.startsWith(OAUTH_PATH_PREFIX) || (url.includes('%') && decodedPath(url).startsWith(OAUTH_PATH_PREFIX));

function decodedPath(url: string): string {
  const path = url.split('?', 1)[0];
  try {
    // decodeURI, as the router: an encoded slash (%2F) stays one, so `/oauth%2Ftoken` is no OAuth path
    return decodeURI(path);
  } catch {
    return path;
  }
}

/** Fastify's own messages for a body that is not JSON (FST_ERR_CTP_INVALID_JSON_BODY, ..._EMPTY_JSON_BODY). */
const BODY_PARSE_MESSAGES = new Set([new errorCodes.FST_ERR_CTP_INVALID_JSON_BODY().message, new errorCodes.FST_ERR_CTP_EMPTY_JSON_BODY().message]);

/** Which failed constraint speaks for a field when several did: the kind of value before its size or format. */
const CONSTRAINT_PRIORITY = ['isDefined', 'isString', 'isBoolean', 'isInt', 'isNumber', 'isArray', 'isObject', 'isUuid', 'isEnum', 'isIn', 'isEmail', 'isUrl', 'equals'];

/**
 * Flattens class-validator errors into `errors[]` with dotted field paths: one entry per
 * offending field (contract), saying what is wrong first: an unknown property, a missing or
 * null value, the wrong kind of value, then size and format.
 */
export function flattenValidationErrors(errors: ValidationError[], parent = ''): FieldError[] {
  const out: FieldError[] = [];
  for (const e of errors) {
    const field = parent ? `${parent}.${e.property}` : e.property;
    if (e.constraints) out.push({ field, message: fieldMessage(field, e.value, e.constraints) });
    if (e.children?.length) out.push(...flattenValidationErrors(e.children, field));
  }
  return out;
}

function fieldMessage(field: string, value: unknown, constraints: Record<string, string>): string {
  if ('whitelistValidation' in constraints) return `property ${field} is not allowed`;
  if (value === undefined) return `${field} is required`;
  if (value === null) return `${field} must not be null`;
  const kind = CONSTRAINT_PRIORITY.find((k) => k in constraints);
  return constraints[kind ?? Object.keys(constraints)[0]];
}

/**
 * PostgreSQL SQLSTATE class 22 (data exception: U+0000 in text, a value the column type cannot
 * hold, ...) reaching the filter means input no validator caught; it is the caller's input, so
 * 400, never 500. Logged as a warning so the missing validation gets noticed.
 */
function fromDatabaseDataError(err: { code?: unknown; message?: string }): AppError | undefined {
  if (typeof err.code !== 'string' || !/^22[0-9A-Z]{3}$/.test(err.code) || !('severity' in err || 'driverError' in err)) return undefined;
  logger.warn({ sqlstate: err.code, message: err.message }, 'input refused by the database (a validation is missing)');
  return new AppError('request/invalid', 'A value in the request cannot be stored');
}

/**
 * PostgreSQL or Redis out of reach (refused, reset, ended by the server, a pool that cannot connect
 * in time, a command without reply in REDIS_COMMAND_TIMEOUT_MS): the dependency is unavailable, 503
 * (`temporarily_unavailable` under /oauth), so clients retry later and an outage is not reported
 * as a bug. SQLSTATE class 08 (connection exception), 57P01-57P03 (the server shutting down or
 * starting), 57014 and 25P03 (DATABASE_STATEMENT_TIMEOUT_MS), the drivers' own connection and
 * timeout messages.
 */
function fromDatabaseUnavailable(err: { code?: unknown; message?: string; errors?: unknown }): AppError | undefined {
  // Node's AggregateError of a connect that tried every address of a name (localhost: ::1 and
  // 127.0.0.1): its code is the first failure's, and it has no syscall of its own
  const first = Array.isArray(err.errors) && err.errors[0] && typeof err.errors[0] === 'object' ? (err.errors[0] as { code?: unknown; message?: string; syscall?: string }) : undefined;
  if (first && first !== err) return fromDatabaseUnavailable(first);
  const code = typeof err.code === 'string' ? err.code : '';
  const message = err.message ?? '';
  const unavailable =
    // connection exceptions, not 08P01 (protocol_violation: a bug of the caller's, e.g. a parameter count)
    /^080(0[0-4]|0[67])$/.test(code) ||
    /^57P0[123]$/.test(code) ||
    // too_many_connections: the server refuses new connections for now
    code === '53300' ||
    // query_canceled (statement_timeout: a statement ran, or waited for a lock, too long) and
    // idle_in_transaction_session_timeout: the request may be sent again
    code === '57014' ||
    code === '25P03' ||
    (['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENOTFOUND', 'EPIPE'].includes(code) && 'syscall' in err) ||
    /^(Connection terminated( unexpectedly| due to connection timeout)?|timeout exceeded when trying to connect|Client has encountered a connection error and is not queryable|Query read timeout|Command timed out|Connection is closed\.|Reached the max retries per request limit.*)$/.test(message);
  return unavailable ? new AppError('server/unavailable', 'A dependency is unavailable; retry shortly') : undefined;
}

/**
 * Whether `err` is PostgreSQL or Redis out of reach (what requests answer 503 for; see fromDatabaseUnavailable), or
 * the 503 AppError a caller already made of it: a background job meeting it failed for the
 * outage, not for its work, and is better tried again later than counted as failed.
 */
export function isDependencyUnavailable(err: unknown): boolean {
  if (err instanceof AppError) return err.code === 'server/unavailable';
  return typeof err === 'object' && err !== null && fromDatabaseUnavailable(err as { code?: unknown; message?: string }) !== undefined;
}

/**
 * PostgreSQL ended the transaction to break a deadlock (40P01) or a serialization conflict
 * (40001), or refused a row that names a row a concurrent transaction deleted as this one waited
 * for it (23503, foreign key violation: a write of a dashboard session racing the erasure of its
 * own account, say): the request collided with a concurrent one and may simply be sent again
 * (and then gets the answer the other's outcome gives, a 401 for a session gone with its
 * account), so 503 with Retry-After rather than 500. Still worth a look (a lock order to fix, or a
 * write not serialized with a delete): logged at error level, with its SQLSTATE.
 */
function fromTransactionConflict(err: { code?: unknown; message?: string }): AppError | undefined {
  if ((err.code !== '40P01' && err.code !== '40001' && err.code !== '23503') || !('severity' in err || 'driverError' in err)) return undefined;
  logger.error({ sqlstate: err.code, message: err.message }, 'transaction aborted by a conflict with a concurrent one (a lock order to fix, or a write racing a delete)');
  return new AppError('server/unavailable', 'The request collided with a concurrent one; retry it', { headers: { 'Retry-After': '1' }, logged: true });
}

function fromFrameworkError(err: { statusCode?: number; code?: string; message?: string }): AppError | undefined {
  const dataError = fromDatabaseDataError(err);
  if (dataError) return dataError;
  const conflict = fromTransactionConflict(err);
  if (conflict) return conflict;
  const down = fromDatabaseUnavailable(err);
  if (down) return down;
  const status = err.statusCode;
  if (err.code === 'FST_ERR_CTP_BODY_TOO_LARGE' || status === 413) return new AppError('request/too_large');
  if (err.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE' || status === 415) return new AppError('request/unsupported_media_type');
  if (
    err.code === 'FST_ERR_CTP_INVALID_JSON_BODY' ||
    err.code === 'FST_ERR_CTP_EMPTY_JSON_BODY' ||
    (err instanceof SyntaxError && status === 400)
  )
    return new AppError('request/malformed_json');
  if (status === 404) return new AppError('request/not_found');
  if (err.code === 'FST_ERR_BAD_URL') return new AppError('request/invalid', 'The URL is not valid (a malformed percent-encoding)');
  if (err.code === 'FST_ERR_MAX_PARAM_LENGTH') return new AppError('request/uri_too_long', 'A path segment is longer than 2,048 characters');
  if (err.code === 'FST_ERR_CTP_INVALID_CONTENT_LENGTH') return new AppError('request/invalid', 'Invalid Content-Length');
  // the client went away before its body arrived (Node's request 'aborted': no syscall, unlike a
  // socket error of PostgreSQL or Redis, which is a server fault): its fault, nobody reads the answer
  if (err.code === 'ECONNRESET' && err.message === 'aborted' && !('syscall' in err)) return new AppError('request/invalid', 'The request was aborted before its body arrived');
  // any other client error a plugin raised (the static files of /docs refuse `..` with 403 and a
  // NUL byte with 400, @fastify/send's http-errors): the path names no file we serve, whatever
  // the reason (a 403 would tell a traversal attempt it found something)
  if (status !== undefined && status >= 400 && status < 500) return status === 403 ? new AppError('request/not_found') : new AppError('request/invalid', 'The request cannot be served');
  return undefined;
}

/** Maps any thrown value to the one error envelope (problem+json, or RFC 6749 under /oauth). */
export function renderError(err: unknown, url: string, requestId?: string): RenderedError {
  const isOAuth = isOAuthPath(url);
  // the path only: a query string may carry a token (the request log drops it too)
  const path = url.split('?')[0];
  if (err instanceof OAuthError) {
    // a 5xx in the RFC 6749 envelope (temporarily_unavailable) is a server error as any other:
    // one error line with the request id and its cause (the dependency failure behind it)
    if (err.status >= 500) logger.error({ err: loggableError(err), request_id: requestId, path }, 'server error');
    return {
      status: err.status,
      contentType: 'application/json; charset=utf-8',
      headers: { 'Cache-Control': 'no-store', Pragma: 'no-cache', ...err.headers },
      body: { error: err.error, ...(err.errorDescription ? { error_description: err.errorDescription } : {}) },
    };
  }
  let appErr: AppError | undefined;
  if (err instanceof AppError) appErr = err;
  else if (err instanceof HttpException) {
    const status = err.getStatus();
    // Nest re-wraps Fastify's body-parser errors in an HttpException that keeps only the message
    const malformed = status === 400 && BODY_PARSE_MESSAGES.has(err.message);
    const code: ErrorCode = malformed ? 'request/malformed_json' :
      status === 404 ? 'request/not_found' : status === 405 ? 'request/method_not_allowed' : status === 413 ? 'request/too_large' : status === 415 ? 'request/unsupported_media_type'
        : status === 401 ? 'auth/unauthorized' : status === 403 ? 'auth/forbidden' : status === 429 ? 'rate_limit/exceeded'
          : status === 503 ? 'server/unavailable' : status >= 500 ? 'server/error' : 'request/invalid';
    appErr = new AppError(code, status === 503 ? unavailableDetail(err) : status >= 500 ? undefined : err.message, { status });
  } else if (err && typeof err === 'object') {
    appErr = fromFrameworkError(err as { statusCode?: number; code?: string });
  }
  if (!appErr) {
    logger.error({ err: loggableError(err), request_id: requestId, path }, 'unhandled error');
    appErr = new AppError('server/error', 'An unexpected error occurred; quote the request id to support');
  } else if (appErr.status >= 500 && !appErr.options.logged) {
    logger.error({ err: loggableError(err), request_id: requestId, path }, 'server error');
  }
  if (isOAuth) {
    const error =
      appErr.status === 401 ? 'invalid_client' : appErr.status === 429 ? 'slow_down' : appErr.status === 503 ? 'temporarily_unavailable'
        : appErr.status >= 500 ? 'server_error' : 'invalid_request';
    return {
      // RFC 6749 section 5.2: 400 unless specified otherwise, so a body that is not a form is
      // 400 whatever its media type (not 415)
      status: appErr.status === 415 ? 400 : appErr.status,
      contentType: 'application/json; charset=utf-8',
      headers: { 'Cache-Control': 'no-store', Pragma: 'no-cache', ...(appErr.options.headers ?? {}) },
      body: { error, error_description: appErr.detail ?? appErr.title },
    };
  }
  const body: ProblemBody = {
    ...(appErr.options.extensions ?? {}),
    type: 'about:blank',
    title: appErr.title,
    status: appErr.status,
    code: appErr.code,
    ...(appErr.detail ? { detail: appErr.detail } : {}),
    ...(appErr.options.errors ? { errors: appErr.options.errors } : {}),
    ...(requestId ? { request_id: requestId } : {}),
  };
  return {
    status: appErr.status,
    contentType: 'application/problem+json; charset=utf-8',
    headers: appErr.options.headers ?? {},
    body: body as unknown as Record<string, unknown>,
  };
}

/** Sends a rendered error (the global filter, Fastify's framework errors). */
export function sendRendered(reply: FastifyReply, r: RenderedError): void {
  void reply.status(r.status).headers(r.headers).type(r.contentType).send(r.body);
}

export { ERROR_CATALOG };

/**
 * A 503 raised as an HttpException (the readiness check): which dependencies are down, by name
 * only (their error messages may name hosts).
 */
export function unavailableDetail(err: HttpException): string | undefined {
  const res = err.getResponse() as { error?: unknown } | string;
  const down = typeof res === 'object' && res.error && typeof res.error === 'object' ? Object.keys(res.error) : [];
  return down.length ? `Unavailable: ${down.join(', ')}` : undefined;
}
