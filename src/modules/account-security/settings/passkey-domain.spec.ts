import { rpIdProblem } from './passkey-domain.handlers';

describe('rpIdProblem (WebAuthn relying-party id)', () => {
  it.each(['example.com', 'login.example.com', 'app.example.co.uk', 'auth.internal', 'xn--bcher-kva.example', 'a-b.example.io'])('accepts %s', (id) => {
    expect(rpIdProblem(id, true)).toBeUndefined();
  });

  it.each([
    ['com', /public suffix/],
    ['co.uk', /public suffix/],
    ['github.io', /public suffix/],
    ['internal', /domain name/],
    ['10.0.0.1', /domain name/],
    ['app..example.com', /domain name/],
    ['example.com.', /domain name/],
    ['-x.example.com', /domain name/],
    ['x-.example.com', /domain name/],
    [`${'a'.repeat(64)}.example.com`, /domain name/],
    ['example.123', /domain name/],
  ])('refuses %s', (id, why) => {
    expect(rpIdProblem(id, false)).toMatch(why);
  });

  it('accepts localhost outside production only', () => {
    expect(rpIdProblem('localhost', false)).toBeUndefined();
    expect(rpIdProblem('localhost', true)).toMatch(/production/);
  });
});
