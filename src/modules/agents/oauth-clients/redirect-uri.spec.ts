import { redirectUriProblem } from './redirect-uri';

describe('redirectUriProblem (RFC 6749 section 3.1.2, RFC 8252, RFC 9700)', () => {
  it.each([
    'https://app.example.com/cb',
    'https://app.example.com',
    'https://app.example.com:8443/cb?x=1',
    'HTTPS://APP.example.com/cb',
    'http://127.0.0.1:3000/cb',
    'http://[::1]:8080/cb',
    'http://localhost:5173/cb',
    'http://LOCALHOST/cb',
    'com.example.app:/oauth2redirect',
    'com.example.app://callback',
  ])('accepts %s', (uri) => expect(redirectUriProblem(uri)).toBeNull());

  it.each([
    ['https://app.example.com/cb#frag', /fragment/],
    ['https://app.example.com/cb#', /fragment/],
    ['com.example.app:/cb#x', /fragment/],
    ['https://user:pass@app.example.com/cb', /userinfo/],
    ['https://user@app.example.com/cb', /userinfo/],
    ['http://user:pass@127.0.0.1/cb', /userinfo/],
    ['com.example.app://user:pass@host/cb', /userinfo/],
    ['http://app.example.com/cb', /https/],
    ['http://127.0.0.1.nip.io/cb', /https/],
    ['http://localhost.example.com/cb', /https/],
    ['http://10.0.0.1/cb', /https/],
    ['myapp:/cb', /reverse domain/],
    ['javascript:alert(1)', /reverse domain/],
    ['data:text/html,hi', /reverse domain/],
    ['file:///etc/passwd', /reverse domain/],
    ['com.example.app:', /absolute URI/],
    ['not a url', /absolute URI/],
    ['/relative/cb', /absolute URI/],
    ['https:app.example.com', /absolute URI/],
    ['https://app.example.com/c b', /absolute URI/],
    ['https:\\\\app.example.com/cb', /absolute URI/],
    ['https://', /absolute URI/],
  ])('refuses %s', (uri, why) => expect(redirectUriProblem(uri)).toMatch(why));
});
