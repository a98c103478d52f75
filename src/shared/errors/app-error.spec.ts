import { AppError, RateLimitedError } from './app-error';
import { OAuthError } from './oauth-error';

describe('AppError', () => {
  it('carries no stack trace for a client error (4xx), and leaves the limit as it was', () => {
    const limit = Error.stackTraceLimit;
    for (const e of [new AppError('auth/invalid_refresh_token'), new RateLimitedError(3), new AppError('server/error', 'x', { status: 400 }), new OAuthError('invalid_grant', 'x')]) {
      expect(e.status).toBeLessThan(500);
      expect(e.stack?.split('\n')).toHaveLength(1);
      expect(e.stack).toContain(e.message);
    }
    expect(Error.stackTraceLimit).toBe(limit);
    expect(new Error('plain').stack?.split('\n').length).toBeGreaterThan(1);
  });

  it('keeps the stack trace of a server error (5xx)', () => {
    const e = new AppError('server/error');
    expect(e.status).toBe(500);
    expect(e.stack?.split('\n').length).toBeGreaterThan(1);
    expect(new AppError('auth/invalid_refresh_token', 'x', { status: 503 }).stack?.split('\n').length).toBeGreaterThan(1);
    expect(new OAuthError('server_error', 'x', 500).stack?.split('\n').length).toBeGreaterThan(1);
  });
});
