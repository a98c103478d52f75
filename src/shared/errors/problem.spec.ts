import { Logger } from '@nestjs/common';
import { DatabaseError } from 'pg';
import { QueryFailedError } from 'typeorm';
import { AppError } from './app-error';
import { OAuthError } from './oauth-error';
import { isDependencyUnavailable, isOAuthPath, renderError } from './problem';

describe('renderError', () => {
  it('a request the client aborted before its body arrived is a 400 client error, not an unhandled one', () => {
    const aborted = Object.assign(new Error('aborted'), { code: 'ECONNRESET', statusCode: 400 });
    const r = renderError(aborted, '/v1/auth/login', 'rid');
    expect(r.status).toBe(400);
    expect(JSON.stringify(r.body)).toContain('aborted');
  });

  it('a socket reset of PostgreSQL during a request is the server side (503 unavailable), never blamed on the client', () => {
    const pg = Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET', errno: -104, syscall: 'read' });
    expect(renderError(pg, '/v1/auth/login', 'rid').status).toBe(503);
    const oddlyNamed = Object.assign(new Error('aborted'), { code: 'ECONNRESET', syscall: 'read' });
    expect(renderError(oddlyNamed, '/v1/auth/login', 'rid').status).toBe(503);
  });

  it('PostgreSQL or Redis out of reach is 503 server/unavailable (temporarily_unavailable under /oauth), not an unexpected 500', () => {
    const cases = [
      Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED', syscall: 'connect' }),
      Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01', severity: 'FATAL' }),
      Object.assign(new Error('the database system is starting up'), { code: '57P03', severity: 'FATAL' }),
      Object.assign(new Error('sorry, too many clients already'), { code: '53300', severity: 'FATAL' }),
      Object.assign(new Error('connection failure'), { code: '08006' }),
      new Error('Connection terminated unexpectedly'),
      new Error('timeout exceeded when trying to connect'),
      // DATABASE_STATEMENT_TIMEOUT_MS: cancelled by the server, a session idle in a transaction ended, no answer at all
      Object.assign(new Error('canceling statement due to statement timeout'), { code: '57014', severity: 'ERROR' }),
      Object.assign(new Error('terminating connection due to idle-in-transaction timeout'), { code: '25P03', severity: 'FATAL' }),
      new Error('Query read timeout'),
      // ioredis: a command without reply in REDIS_COMMAND_TIMEOUT_MS, a closed connection
      new Error('Command timed out'),
      new Error('Connection is closed.'),
    ];
    for (const err of cases) {
      const r = renderError(err, '/v1/auth/login', 'rid');
      expect([err.message, r.status, (r.body as { code?: string }).code]).toEqual([err.message, 503, 'server/unavailable']);
      expect((renderError(err, '/oauth/token', 'rid').body as { error?: string }).error).toBe('temporarily_unavailable');
    }
    // a bug stays a 500, a protocol violation (08P01: a statement given the wrong number of parameters) too
    expect(renderError(new Error('boom'), '/v1/auth/login', 'rid').status).toBe(500);
    expect(renderError(Object.assign(new Error('bind message supplies 1 parameters, but prepared statement "" requires 2'), { code: '08P01', severity: 'ERROR' }), '/v1/auth/login', 'rid').status).toBe(500);
    // PostgreSQL down behind a name of two addresses (localhost): Node's AggregateError
    const both = Object.assign(new AggregateError([Object.assign(new Error('connect ECONNREFUSED ::1:5432'), { code: 'ECONNREFUSED', syscall: 'connect' }), Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED', syscall: 'connect' })], ''), { code: 'ECONNREFUSED' });
    expect(renderError(both, '/v1/auth/login', 'rid').status).toBe(503);
  });
});

describe('renderError: client errors of plugins, and what a server error logs', () => {
  afterEach(() => jest.restoreAllMocks());

  it('an http-error a plugin raised (the static files of /docs: a traversal 403, a NUL byte 400) is a 4xx, never an unhandled 500', () => {
    const logged = jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
    const forbidden = Object.assign(new Error('Forbidden'), { name: 'ForbiddenError', status: 403, statusCode: 403, expose: true });
    const bad = Object.assign(new Error('Bad Request'), { name: 'BadRequestError', status: 400, statusCode: 400, expose: true });
    expect([renderError(forbidden, '/docs/..', 'rid').status, (renderError(forbidden, '/docs/..', 'rid').body as { code: string }).code]).toEqual([404, 'request/not_found']);
    expect([renderError(bad, '/docs/x%00', 'rid').status, (renderError(bad, '/docs/x%00', 'rid').body as { code: string }).code]).toEqual([400, 'request/invalid']);
    expect(logged).not.toHaveBeenCalled();
  });

  it('a server error logs the path without its query string (a token may ride in it)', () => {
    const logged = jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
    expect(renderError(new Error('boom'), '/v1/auth/register?token=QSECRET123', 'rid').status).toBe(500);
    expect(logged).toHaveBeenCalledTimes(1);
    expect(JSON.stringify(logged.mock.calls[0][0], (_k, v) => (v instanceof Error ? v.message : v))).not.toContain('QSECRET123');
    expect(logged.mock.calls[0][0]).toMatchObject({ path: '/v1/auth/register', request_id: 'rid' });
  });

  it("a database error is logged without the values its statement repeats (a unique violation's detail names the email), with what a fix needs", () => {
    const logged = jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
    const pgError = Object.assign(new DatabaseError('duplicate key value violates unique constraint "users_email_uq"', 0, 'error'), {
      severity: 'ERROR',
      code: '23505',
      detail: 'Key (tenant_id, email_normalized)=(t1, ada@example.com) already exists.',
      where: 'SQL statement "INSERT ... ada@example.com"',
      constraint: 'users_email_uq',
      table: 'users',
    });
    const typeorm = new QueryFailedError('INSERT INTO users ...', ['ada@example.com', 'argon2-hash'], pgError);
    for (const err of [pgError, typeorm]) {
      logged.mockClear();
      expect(renderError(err, '/v1/auth/register', 'rid').status).toBe(500);
      const line = logged.mock.calls[0][0] as { err: Record<string, unknown> };
      const text = JSON.stringify(line.err, (_k, v) => (v instanceof Error ? { ...v, message: v.message } : v));
      expect(text).not.toContain('ada@example.com');
      expect(text).not.toContain('argon2-hash');
      expect(text).toContain('users_email_uq');
      expect(line.err).toBeInstanceOf(Error);
    }
    // the error itself is untouched (only the logged copy drops them)
    expect(pgError.detail).toContain('ada@example.com');
    // any other error is logged as it is (its cause, its own fields), even one with a severity
    const other = Object.assign(new Error('outer', { cause: new Error('root cause') }), { severity: 'high', detail: 'kept' });
    logged.mockClear();
    renderError(other, '/v1/auth/register', 'rid');
    expect((logged.mock.calls[0][0] as { err: unknown }).err).toBe(other);
  });

  it('an OAuth 5xx (temporarily_unavailable) logs one server error line with its cause; the response is unchanged; an OAuth 4xx logs nothing', () => {
    const logged = jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
    const redis = new Error('Command timed out');
    const kernel = new AppError('server/unavailable', 'Rate limiter unavailable', { cause: redis });
    // the cause is the standard Error one: not enumerable, not in the options the log serializes
    expect([kernel.cause, Object.keys(kernel).includes('cause'), 'cause' in kernel.options]).toEqual([redis, false, false]);
    const unavailable = new OAuthError('temporarily_unavailable', 'The service is temporarily unavailable; retry later', 503, { 'Retry-After': '5' });
    Object.defineProperty(unavailable, 'cause', { value: kernel });
    const r = renderError(unavailable, '/oauth/introspect?x=1', 'rid');
    expect([r.status, r.body, r.headers['Retry-After']]).toEqual([503, { error: 'temporarily_unavailable', error_description: 'The service is temporarily unavailable; retry later' }, '5']);
    expect(logged).toHaveBeenCalledTimes(1);
    expect(logged.mock.calls[0]).toEqual([{ err: unavailable, request_id: 'rid', path: '/oauth/introspect' }, 'server error']);
    renderError(new OAuthError('invalid_request', 'token is required'), '/oauth/introspect', 'rid2');
    expect(logged).toHaveBeenCalledTimes(1);
  });
});

describe('renderError: transaction conflicts', () => {
  it('a deadlock, a serialization failure or a foreign key a concurrent delete broke (PostgreSQL errors) is 503 with Retry-After (retryable), not an unexpected 500', () => {
    for (const code of ['40P01', '40001', '23503']) {
      const err = Object.assign(new Error('deadlock detected'), { code, severity: 'ERROR' });
      const r = renderError(err, '/v1/auth/mfa/disable', 'rid');
      expect([r.status, (r.body as { code?: string }).code, r.headers?.['Retry-After']]).toEqual([503, 'server/unavailable', '1']);
      expect((renderError(err, '/oauth/token', 'rid').body as { error?: string }).error).toBe('temporarily_unavailable');
    }
    // the same code from something that is not PostgreSQL is no conflict
    expect(renderError(Object.assign(new Error('x'), { code: '40P01' }), '/v1/auth/login', 'rid').status).toBe(500);
  });
});

describe('isOAuthPath', () => {
  it('reads the path as the router does: percent-decoded', () => {
    expect(isOAuthPath('/oauth/token')).toBe(true);
    expect(isOAuthPath('/%6fauth/token')).toBe(true);
    expect(isOAuthPath('/%6Fauth/introspect?x=%zz')).toBe(true);
    expect(isOAuthPath('/v1/auth/login?next=/oauth/token')).toBe(false);
    expect(isOAuthPath('/v1/%zz')).toBe(false);
    // an encoded slash stays one for the router: not /oauth/token
    expect(isOAuthPath('/oauth%2Ftoken')).toBe(false);
  });
});

describe('isDependencyUnavailable (background jobs: an outage, not a failure of their work)', () => {
  it('is true for PostgreSQL or Redis out of reach and for the 503 AppError made of it; false for anything else', () => {
    expect(isDependencyUnavailable(Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED', syscall: 'connect' }))).toBe(true);
    expect(isDependencyUnavailable(new Error('Connection terminated unexpectedly'))).toBe(true);
    expect(isDependencyUnavailable(new AppError('server/unavailable', 'Rate limiter unavailable'))).toBe(true);
    expect(isDependencyUnavailable(new Error('duplicate key value violates unique constraint'))).toBe(false);
    expect(isDependencyUnavailable(new AppError('request/invalid'))).toBe(false);
    expect(isDependencyUnavailable(undefined)).toBe(false);
    expect(isDependencyUnavailable('ECONNREFUSED')).toBe(false);
  });
});
