import { AppError, challengeFor, insufficientScope, RateLimitedError, stepUpRequired } from './app-error';
import { OAuthError } from './oauth-error';

describe('AppError', () => {
  it('carries no stack trace for a client error (4xx), and leaves the limit as it was', () => {
    const limit = Error.stackTraceLimit;
    for (const e of [new AppError('auth/invalid_refresh_token'), new RateLimitedError('test', 3), new AppError('server/error', 'x', { status: 400 }), new OAuthError('invalid_grant', 'x')]) {
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

describe('authentication challenges', () => {
  it('a 403 of a bearer route keeps its code and detail and carries a well-formed challenge (no quote, backslash or non-ASCII in error_description)', () => {
    const forbidden = insufficientScope('Agent tokens cannot "manage" \\ agents \u2014 use the user\'s own token');
    expect([forbidden.status, forbidden.code, forbidden.detail]).toEqual([403, 'auth/forbidden', 'Agent tokens cannot "manage" \\ agents \u2014 use the user\'s own token']);
    expect(forbidden.options.headers?.['WWW-Authenticate']).toBe('Bearer error="insufficient_scope", error_description="Agent tokens cannot manage  agents  use the user\'s own token"');
    const stepUp = stepUpRequired('Re-verify (step-up) within the last 300 seconds first', 300);
    expect([stepUp.status, stepUp.code]).toEqual([403, 'auth/step_up_required']);
    expect(stepUp.options.headers?.['WWW-Authenticate']).toBe('Bearer error="insufficient_user_authentication", error_description="Re-verify (step-up) within the last 300 seconds first", max_age=300');
  });

  it('a 401 without a challenge of its own gets the route credential\'s (ApiKey by default)', () => {
    expect(challengeFor('bearer', 'auth/invalid_api_key')).toBe('Bearer error="invalid_token", error_description="invalid_api_key"');
    expect(challengeFor('bearer', 'auth/invalid_credentials')).toBe('Bearer realm="api"');
    expect(challengeFor('api-key', 'auth/invalid_refresh_token')).toBe('ApiKey realm="api"');
    expect(challengeFor('dashboard', 'auth/unauthorized')).toBe('Cookie realm="dashboard"');
    expect(challengeFor(undefined, 'auth/invalid_api_key')).toBe('ApiKey realm="api"');
  });
});
