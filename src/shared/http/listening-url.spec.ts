import { listeningUrl } from './listening-url';

describe('listeningUrl', () => {
  it('names the bound address, every interface included, with IPv6 in brackets', () => {
    expect(listeningUrl({ address: '0.0.0.0', family: 'IPv4', port: 3001 })).toBe('http://0.0.0.0:3001');
    expect(listeningUrl({ address: '::', family: 'IPv6', port: 3001 })).toBe('http://[::]:3001');
    expect(listeningUrl({ address: '127.0.0.1', family: 'IPv4', port: 4000 })).toBe('http://127.0.0.1:4000');
    expect(listeningUrl('/run/authp.sock')).toBe('/run/authp.sock');
    expect(listeningUrl(null)).toBe('an unknown address');
  });
});
