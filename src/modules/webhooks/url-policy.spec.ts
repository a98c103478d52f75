import { classifyAddress, displayUrl, parseWebhookUrl, urlPolicyFor, validateWebhookUrl, WebhookUrlError } from './url-policy';

const prod = { allowLoopback: false };
const dev = { allowLoopback: true };
const resolvesTo = (...addresses: string[]) => async () => addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
const fails = async () => {
  throw Object.assign(new Error('getaddrinfo ENOTFOUND'), { code: 'ENOTFOUND' });
};

describe('webhook URL policy', () => {
  it.each([
    ['127.0.0.1', 'loopback'],
    ['127.255.0.9', 'loopback'],
    ['::1', 'loopback'],
    ['::ffff:127.0.0.1', 'loopback'],
    ['10.1.2.3', 'private'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['192.168.1.1', 'private'],
    ['100.64.0.1', 'private'],
    ['fd00::1', 'private'],
    ['::ffff:10.0.0.1', 'private'],
    ['64:ff9b::a00:1', 'private'],
    ['2002:c0a8:101::1', 'private'],
    ['169.254.169.254', 'link_local'],
    ['::a9fe:a9fe', 'link_local'], // IPv4-compatible ::169.254.169.254
    ['::169.254.169.254', 'link_local'],
    ['::ffff:0:a9fe:a9fe', 'link_local'], // IPv4-translated (SIIT)
    ['::ffff:0:10.0.0.1', 'private'],
    ['::7f00:1', 'loopback'],
    ['::ff:ffff', 'reserved'], // ::0.255.255.255
    ['fe80::1', 'link_local'],
    ['0.0.0.0', 'reserved'],
    ['::', 'reserved'],
    ['224.0.0.1', 'reserved'],
    ['255.255.255.255', 'reserved'],
    ['2001:db8::1', 'reserved'],
    ['3fff::1', 'reserved'], // documentation (RFC 9637)
    ['3fff:fff:ffff::1', 'reserved'],
    ['2001:2::1', 'reserved'], // benchmarking
    ['2001:2:0:ffff::1', 'reserved'],
    ['2001:10::1', 'reserved'], // ORCHID
    ['2001:1f:ffff::1', 'reserved'],
    ['2001:20::1', 'reserved'], // ORCHIDv2
    ['2001:2f:ffff::1', 'reserved'],
    ['5f00::1', 'reserved'], // SRv6 SIDs
    ['5f00:ffff::1', 'reserved'],
    ['100:0:0:1::1', 'reserved'], // dummy prefix (RFC 9780)
    ['100:0:0:1:ffff:ffff:ffff:ffff', 'reserved'],
    ['3fff:1000::1', 'public'], // just past 3fff::/20
    ['2001:3::1', 'public'], // just past 2001:2::/48 ... and 2001::/32
    ['2001:30::1', 'public'], // just past 2001:20::/28
    ['5f01::1', 'public'],
    ['100:0:0:2::1', 'public'],
    ['93.184.216.34', 'public'],
    ['172.32.0.1', 'public'],
    ['2606:4700::1111', 'public'],
    ['64:ff9b::5db8:d822', 'public'],
  ])('classifies %s as %s', (ip, cls) => {
    expect(classifyAddress(ip)).toBe(cls);
  });

  it('accepts https to public addresses in production', async () => {
    await expect(validateWebhookUrl('https://hooks.example.com/in?x=1', prod, resolvesTo('93.184.216.34', '2606:4700::1111'))).resolves.toBeInstanceOf(URL);
    await expect(validateWebhookUrl('https://93.184.216.34:8443/in', prod)).resolves.toBeInstanceOf(URL);
  });

  it.each([
    ['http://hooks.example.com/in', resolvesTo('93.184.216.34'), 'must use https'],
    ['https://localhost/in', resolvesTo('127.0.0.1'), 'host does not resolve to a public address'],
    ['https://127.0.0.1/in', undefined, 'must not resolve'],
    ['https://[::1]/in', undefined, 'must not resolve'],
    ['https://169.254.169.254/latest/meta-data', undefined, 'must not resolve'],
    ['https://0x7f.1/in', undefined, 'must not resolve'],
    ['https://2130706433/in', undefined, 'must not resolve'],
    ['https://internal.example.com/in', resolvesTo('10.0.0.8'), 'host does not resolve to a public address'],
    // one bad address among good ones is enough to refuse
    ['https://mixed.example.com/in', resolvesTo('93.184.216.34', '192.168.0.10'), 'host does not resolve to a public address'],
    ['https://nowhere.invalid/in', fails, 'host does not resolve to a public address'],
    ['https://user:pw@hooks.example.com/in', resolvesTo('93.184.216.34'), 'credentials'],
    ['https://hooks.example.com/in#frag', resolvesTo('93.184.216.34'), 'fragment'],
    // an empty fragment leaves url.hash '' but the `#` in the stored URL
    ['https://hooks.example.com/in#', resolvesTo('93.184.216.34'), 'fragment'],
    ['https://93.184.216.34/#', undefined, 'fragment'],
    ['https://hooks.example.com:0/in', resolvesTo('93.184.216.34'), 'port 0'],
    ['https://hooks.example.com:00000/in', resolvesTo('93.184.216.34'), 'port 0'],
    ['ftp://hooks.example.com/in', resolvesTo('93.184.216.34'), 'absolute http(s) URL'],
    ['/relative', undefined, 'absolute http(s) URL'],
    [`https://hooks.example.com/${'a'.repeat(2100)}`, resolvesTo('93.184.216.34'), 'at most 2048'],
  ])('refuses %s in production', async (url, lookup, message) => {
    await expect(validateWebhookUrl(url, prod, lookup)).rejects.toThrow(WebhookUrlError);
    await expect(validateWebhookUrl(url, prod, lookup)).rejects.toThrow(message);
  });

  it('allows loopback (http or https) under development and test, and nothing else over http', async () => {
    await expect(validateWebhookUrl('http://127.0.0.1:4000/in', dev)).resolves.toBeInstanceOf(URL);
    await expect(validateWebhookUrl('http://localhost:4000/in', dev, resolvesTo('127.0.0.1', '::1'))).resolves.toBeInstanceOf(URL);
    await expect(validateWebhookUrl('https://[::1]:4000/in', dev)).resolves.toBeInstanceOf(URL);
    await expect(validateWebhookUrl('http://hooks.example.com/in', dev, resolvesTo('93.184.216.34'))).rejects.toThrow('must use https');
    await expect(validateWebhookUrl('http://10.0.0.1/in', dev)).rejects.toThrow('must not resolve');
    await expect(validateWebhookUrl('https://169.254.169.254/', dev)).rejects.toThrow('must not resolve');
    await expect(validateWebhookUrl('http://127.0.0.1:41269/#', dev)).rejects.toThrow('must not contain a fragment');
  });

  it('displays URLs without their query string', () => {
    expect(displayUrl('https://hooks.example.com/in?token=secret')).toBe('https://hooks.example.com/in');
  });

  it('measures the 2048-character limit on the stored (percent-encoded) form at registration only: an endpoint stored before keeps its deliveries', async () => {
    const long = `https://93.184.216.34/${'\u{1F600}'.repeat(200)}`; // 222 characters given, 2,422 stored
    await expect(validateWebhookUrl(long, prod, resolvesTo('93.184.216.34'))).rejects.toThrow(/once percent-encoded/);
    await expect(validateWebhookUrl(`https://93.184.216.34/${'a'.repeat(2000)}`, prod, resolvesTo('93.184.216.34'))).resolves.toBeInstanceOf(URL);
    // delivery re-parses the stored URL: no length rule there
    expect(parseWebhookUrl(new URL(long).href, prod).href).toBe(new URL(long).href);
  });

  it('urlPolicyFor takes the DNS servers loadConfig parsed (config.webhookDnsServers)', () => {
    expect(urlPolicyFor({ isProduction: true, webhookDnsServers: ['1.1.1.1', '[::1]:5353'] })).toEqual({ allowLoopback: false, dnsServers: ['1.1.1.1', '[::1]:5353'] });
    expect(urlPolicyFor({ isProduction: false, webhookDnsServers: [] })).toEqual({ allowLoopback: true });
    expect(urlPolicyFor({ isProduction: true })).toEqual({ allowLoopback: false });
  });
});
