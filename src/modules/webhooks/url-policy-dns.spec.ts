import * as dns from 'dns';
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

  it('hung lookups do not hold up the thread pool: OS lookups and other names resolve meanwhile', async () => {
    const hung = Array.from({ length: 8 }, () => publicLookupAll('hung.example', { timeoutMs: 2000, servers: [server.address] }).catch((e: unknown) => e));
    const start = Date.now();
    await dns.promises.lookup('localhost');
    expect(await resolveAndCheck(new URL('https://public.example/in'), policy)).toHaveLength(2);
    expect(Date.now() - start).toBeLessThan(500);
    for (const e of await Promise.all(hung)) expect(e).toBeInstanceOf(WebhookDnsError);
  });
});
