import { isOAuthPath, renderError } from './problem';

describe('renderError', () => {
  it('a request the client aborted before its body arrived is a 400 client error, not an unhandled one', () => {
    const aborted = Object.assign(new Error('aborted'), { code: 'ECONNRESET', statusCode: 400 });
    const r = renderError(aborted, '/v1/auth/login', 'rid');
    expect(r.status).toBe(400);
    expect(JSON.stringify(r.body)).toContain('aborted');
  });

  it('a socket reset of PostgreSQL or Redis during a request is a server error (500), never blamed on the client', () => {
    const pg = Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET', errno: -104, syscall: 'read' });
    expect(renderError(pg, '/v1/auth/login', 'rid').status).toBe(500);
    const oddlyNamed = Object.assign(new Error('aborted'), { code: 'ECONNRESET', syscall: 'read' });
    expect(renderError(oddlyNamed, '/v1/auth/login', 'rid').status).toBe(500);
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
