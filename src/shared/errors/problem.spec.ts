import { isOAuthPath, renderError } from './problem';

describe('renderError', () => {
  it('a request the client aborted before its body arrived is a 400 client error, not an unhandled one', () => {
    const aborted = Object.assign(new Error('aborted'), { code: 'ECONNRESET', statusCode: 400 });
    const r = renderError(aborted, '/v1/auth/login', 'rid');
    expect(r.status).toBe(400);
    expect(JSON.stringify(r.body)).toContain('aborted');
  });
});

describe('isOAuthPath', () => {
  it('reads the path as the router does: percent-decoded', () => {
    expect(isOAuthPath('/oauth/token')).toBe(true);
    expect(isOAuthPath('/%6fauth/token')).toBe(true);
    expect(isOAuthPath('/%6Fauth/introspect?x=%zz')).toBe(true);
    expect(isOAuthPath('/v1/auth/login?next=/oauth/token')).toBe(false);
    expect(isOAuthPath('/v1/%zz')).toBe(false);
  });
});
