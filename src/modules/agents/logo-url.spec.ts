import { isLogoUrl } from './logo-url';

describe('isLogoUrl (an agent logo every end user loads)', () => {
  it('accepts https URLs of public hosts', () => {
    for (const v of ['https://cdn.example.com/logo.png', 'https://cdn.example.com:8443/a/b.svg?v=2', 'https://93.184.216.34/l.png', 'https://xn--bcher-kva.example/l.png']) expect([v, isLogoUrl(v)]).toEqual([v, true]);
  });

  it('refuses other schemes, credentials, fragments and hosts of the viewer\u2019s machine or network', () => {
    for (const v of [
      'http://cdn.example.com/l.png',
      'javascript:alert(1)',
      'data:image/png;base64,AAAA',
      'https://u:p@cdn.example.com/l.png',
      'https://cdn.example.com/l.png#x',
      'https://127.0.0.1/l.png',
      'https://[::1]/l.png',
      'https://[::ffff:10.0.0.1]/l.png',
      'https://192.168.1.1/l.png',
      'https://169.254.169.254/l.png',
      'https://localhost/l.png',
      'https://a.localhost/l.png',
      'https://intranet/l.png',
      'not a url',
      42,
    ]) {
      expect([v, isLogoUrl(v)]).toEqual([v, false]);
    }
  });
});
