import * as dns from 'dns';
import { createSocket } from 'dgram';
import { DnsTestServer } from '../../../test/e2e/webhooks/dns-test-server';
import { publicLookupAll, resolveAndCheck, validateWebhookUrl, WebhookDnsError, WebhookUrlError } from './url-policy';

const prod = { allowLoopback: false };
const dev = { allowLoopback: true };

/** Host names resolved through c-ares against a real DNS server on 127.0.0.1 (WEBHOOK_DNS_SERVERS). */
describe('webhook URL policy: DNS lookups (local UDP DNS server)', () => {
  let server: DnsTestServer;
  let policy: typeof prod & { dnsServers: string[] };
  let devPolicy: typeof dev & { dnsServers: string[] };

  beforeAll(async () => {
    server = await new DnsTestServer().start();
    policy = { ...prod, dnsServers: [server.address] };
    devPolicy = { ...dev, dnsServers: [server.address] };
    server.set('public.example', { addresses: ['93.184.216.34', '2606:4700::1111'] });
    server.set('v6only.example', { addresses: ['2606:4700::1111'] });
    server.set('internal.example', { addresses: ['10.0.0.8'] });
    server.set('loop.example', { addresses: ['127.0.0.1'] });
    server.set('sneaky.example', { addresses: ['93.184.216.34', 'fd00::1'] });
    server.set('metadata.example', { addresses: ['169.254.169.254'] });
    server.set('hung.example', 'silent');
    server.set('broken.example', 'servfail');
  });
  afterAll(() => server.close());

  it('resolves A and AAAA records and accepts a name whose every address is public', async () => {
    const addresses = await resolveAndCheck(new URL('https://public.example/in'), policy);
    expect(addresses).toEqual([
      { address: '93.184.216.34', family: 4 },
      { address: '2606:4700::1111', family: 6 },
    ]);
    expect(await resolveAndCheck(new URL('https://v6only.example/in'), policy)).toEqual([{ address: '2606:4700::1111', family: 6 }]);
  });

  it.each([
    ['https://internal.example/in', 'must not resolve'],
    ['https://loop.example/in', 'must not resolve'],
    ['https://metadata.example/in', 'must not resolve'],
    // an AAAA record is checked like an A record
    ['https://sneaky.example/in', 'must not resolve'],
    ['https://nowhere.example/in', 'host does not resolve'],
  ])('refuses %s in production', async (url, message) => {
    await expect(validateWebhookUrl(url, policy)).rejects.toThrow(message);
  });

  it('accepts a name resolving to loopback where loopback is allowed (development, test); private addresses stay refused', async () => {
    await expect(validateWebhookUrl('https://loop.example/in', devPolicy)).resolves.toBeInstanceOf(URL);
    await expect(validateWebhookUrl('https://internal.example/in', devPolicy)).rejects.toThrow('must not resolve');
  });

  it('refuses localhost names in production without asking DNS', async () => {
    const before = server.queries.length;
    await expect(validateWebhookUrl('https://localhost/in', policy)).rejects.toThrow('must not resolve');
    await expect(validateWebhookUrl('https://api.localhost./in', policy)).rejects.toThrow('must not resolve');
    expect(server.queries.length).toBe(before);
  });

  it('gives up on a server that never answers within the time limit, cancelling the queries', async () => {
    const start = Date.now();
    const err = await validateWebhookUrl('https://hung.example/in', policy, undefined, { timeoutMs: 500 }).catch((e: unknown) => e);
    const took = Date.now() - start;
    expect(err).toBeInstanceOf(WebhookDnsError);
    expect(err).toBeInstanceOf(WebhookUrlError);
    expect((err as Error).message).toBe('host did not resolve within 500 ms');
    expect(took).toBeGreaterThanOrEqual(450);
    expect(took).toBeLessThan(1500);
    expect(server.queries.some((q) => q.name === 'hung.example')).toBe(true);
  });

  it('ends the lookup as soon as its signal aborts (the attempt deadline)', async () => {
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 100);
    const start = Date.now();
    await expect(publicLookupAll('hung.example', { timeoutMs: 10_000, signal: ac.signal, servers: [server.address] })).rejects.toThrow(WebhookDnsError);
    expect(Date.now() - start).toBeLessThan(1000);
  });

  it('an already aborted signal ends the lookup at once, without a query', async () => {
    const ac = new AbortController();
    ac.abort();
    const before = server.queries.length;
    const start = Date.now();
    // public.example answers at once: a lookup that went ahead would resolve
    const err = await publicLookupAll('public.example', { timeoutMs: 10_000, signal: ac.signal, servers: [server.address] }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(WebhookDnsError);
    expect((err as WebhookDnsError).reason).toBe('timeout');
    expect(Date.now() - start).toBeLessThan(200);
    // and through the real path (resolveAndCheck, defaultLookupAll)
    await expect(resolveAndCheck(new URL('https://hung.example/in'), policy, { timeoutMs: 10_000, signal: ac.signal })).rejects.toThrow(WebhookDnsError);
    expect(Date.now() - start).toBeLessThan(500);
    expect(server.queries.length).toBe(before);
  });

  it('a server failure (SERVFAIL) or an unreachable server (ECONNREFUSED) is a failed lookup, not "no such name"', async () => {
    const servfail = await publicLookupAll('broken.example', { timeoutMs: 2000, servers: [server.address] }).catch((e: unknown) => e);
    expect(servfail).toBeInstanceOf(WebhookDnsError);
    expect((servfail as WebhookDnsError).reason).toBe('failed');
    // a UDP port nothing listens on (bound, then closed): the kernel answers "port unreachable"
    const probe = createSocket('udp4');
    await new Promise<void>((resolve) => probe.bind(0, '127.0.0.1', resolve));
    const closed = `127.0.0.1:${probe.address().port}`;
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    const start = Date.now();
    const refused = await publicLookupAll('public.example', { timeoutMs: 2000, servers: [closed] }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(WebhookDnsError);
    expect((refused as WebhookDnsError).reason).toBe('failed');
    expect(Date.now() - start).toBeLessThan(1500);
    // NXDOMAIN stays "does not resolve"
    await expect(publicLookupAll('nowhere.example', { timeoutMs: 2000, servers: [server.address] })).resolves.toEqual([]);
  });

  it('a name c-ares refuses to ask (a label over 63 characters) is the URL\'s fault, not a DNS failure', async () => {
    const err = await validateWebhookUrl(`https://${'a'.repeat(70)}.example/in`, policy).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(WebhookUrlError);
    expect(err).not.toBeInstanceOf(WebhookDnsError);
    expect((err as Error).message).toBe('host does not resolve');
  });

  it('hung lookups do not hold up the thread pool: OS lookups and other names resolve meanwhile', async () => {
    const before = server.queries.length;
    // the real path (resolveAndCheck, defaultLookupAll, the policy's servers) for a name that is not localhost
    const hung = Array.from({ length: 8 }, () => resolveAndCheck(new URL('https://hung.example/in'), policy, { timeoutMs: 2000 }).catch((e: unknown) => e));
    const start = Date.now();
    await dns.promises.lookup('localhost');
    expect(await resolveAndCheck(new URL('https://public.example/in'), policy)).toHaveLength(2);
    expect(Date.now() - start).toBeLessThan(500);
    // asked of the configured server (getaddrinfo would ask the system's, or block a pool thread each)
    expect(server.queries.slice(before).filter((q) => q.name === 'hung.example' && q.type === 1).length).toBeGreaterThanOrEqual(8);
    for (const e of await Promise.all(hung)) expect(e).toBeInstanceOf(WebhookDnsError);
  });
});
