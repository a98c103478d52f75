import * as dns from 'dns';
import { createSocket } from 'dgram';
import { DnsTestServer } from '../../../test/e2e/webhooks/dns-test-server';
import { publicLookupAll, resolveAndCheck, validateWebhookUrl, WebhookDnsError, WebhookUrlError } from './url-policy';

const prod = { allowLoopback: false };
const dev = { allowLoopback: true };

/**
 * How `p` settled before the event loop's next turn, or 'pending': settled then, it waited for no
 * timer and no I/O (a DNS query cannot have been sent and answered), however slow the machine.
 */
async function settledThisTurn(p: Promise<unknown>): Promise<{ value: unknown } | { error: unknown } | 'pending'> {
  const outcome = p.then(
    (value) => ({ value }),
    (error: unknown) => ({ error }),
  );
  return Promise.race([outcome, new Promise<'pending'>((r) => setImmediate(() => r('pending')))]);
}

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
    ['https://internal.example/in', 'host does not resolve to a public address'],
    ['https://loop.example/in', 'host does not resolve to a public address'],
    ['https://metadata.example/in', 'host does not resolve to a public address'],
    // an AAAA record is checked like an A record
    ['https://sneaky.example/in', 'host does not resolve to a public address'],
    // a name that does not exist is answered as one resolving to a private address: no oracle of
    // the platform's private DNS names
    ['https://nowhere.example/in', 'host does not resolve to a public address'],
  ])('refuses %s in production', async (url, message) => {
    await expect(validateWebhookUrl(url, policy)).rejects.toThrow(message);
  });

  it('accepts a name resolving to loopback where loopback is allowed (development, test); private addresses stay refused', async () => {
    await expect(validateWebhookUrl('https://loop.example/in', devPolicy)).resolves.toBeInstanceOf(URL);
    await expect(validateWebhookUrl('https://internal.example/in', devPolicy)).rejects.toThrow('host does not resolve to a public address');
  });

  it('refuses localhost names in production without asking DNS', async () => {
    const before = server.queries.length;
    await expect(validateWebhookUrl('https://localhost/in', policy)).rejects.toThrow('host does not resolve to a public address');
    await expect(validateWebhookUrl('https://api.localhost./in', policy)).rejects.toThrow('host does not resolve to a public address');
    expect(server.queries.length).toBe(before);
  });

  it('gives up on a server that never answers within the time limit, cancelling the queries', async () => {
    const events: string[] = [];
    const start = Date.now();
    const lookup = validateWebhookUrl('https://hung.example/in', policy, undefined, { timeoutMs: 500 })
      .catch((e: unknown) => e)
      .finally(() => events.push('settled'));
    // a timer started after the lookup's own, due 250 ms past the limit, then one more turn of
    // the event loop: a loaded machine delays it as much as the lookup's timer, so the order
    // holds however late both fire; a lookup running past its limit (c-ares' own retries, a
    // longer timer) settles after it
    const pastLimit = new Promise<void>((r) =>
      setTimeout(() => {
        setTimeout(() => {
          events.push('past the limit');
          r();
        }, 1);
      }, 750),
    );
    const err = await lookup;
    const took = Date.now() - start;
    await pastLimit;
    expect(err).toBeInstanceOf(WebhookDnsError);
    expect(err).toBeInstanceOf(WebhookUrlError);
    expect((err as Error).message).toBe('host did not resolve within 500 ms');
    // not before the limit (a timer never fires early; a loaded machine only makes it later)
    expect(took).toBeGreaterThanOrEqual(450);
    expect(events).toEqual(['settled', 'past the limit']);
    expect(server.queries.some((q) => q.name === 'hung.example')).toBe(true);
  });

  it('ends the lookup as soon as its signal aborts (the attempt deadline)', async () => {
    const ac = new AbortController();
    const events: string[] = [];
    const lookup = publicLookupAll('hung.example', { timeoutMs: 10_000, signal: ac.signal, servers: [server.address] })
      .catch((e: unknown) => e)
      .finally(() => events.push('settled'));
    let observer: NodeJS.Timeout | undefined;
    const aborted = new Promise<void>((r) =>
      setTimeout(() => {
        events.push('abort');
        ac.abort();
        // started at the abort, so a late timer on a loaded machine does not count against the
        // lookup; it fires on a later turn of the event loop than the abort's
        observer = setTimeout(() => {
          events.push('1 s after the abort');
          r();
        }, 1000);
      }, 100),
    );
    const err = await Promise.race([lookup, aborted]);
    clearTimeout(observer);
    // still waiting on the silent server when the signal aborted, and ended by it: not by c-ares'
    // first retry (3.3 s) nor by the lookup's own limit (10 s)
    expect(events).toEqual(['abort', 'settled']);
    expect(err).toBeInstanceOf(WebhookDnsError);
    expect((err as WebhookDnsError).reason).toBe('timeout');
  });

  it('an already aborted signal ends the lookup at once, without a query', async () => {
    const ac = new AbortController();
    ac.abort();
    const before = server.queries.length;
    // public.example answers at once: a lookup that went ahead would resolve
    const direct = await settledThisTurn(publicLookupAll('public.example', { timeoutMs: 10_000, signal: ac.signal, servers: [server.address] }));
    // rejected before the event loop's next turn: no query was sent and waited for
    expect(direct).toEqual({ error: expect.any(WebhookDnsError) });
    expect(((direct as { error: unknown }).error as WebhookDnsError).reason).toBe('timeout');
    // and through the real path (resolveAndCheck, defaultLookupAll)
    const real = await settledThisTurn(resolveAndCheck(new URL('https://hung.example/in'), policy, { timeoutMs: 10_000, signal: ac.signal }));
    expect(real).toEqual({ error: expect.any(WebhookDnsError) });
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
    const refused = await publicLookupAll('public.example', { timeoutMs: 6000, servers: [closed] }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(WebhookDnsError);
    expect((refused as WebhookDnsError).reason).toBe('failed');
    // ended by the refusal (at once), not by waiting out the 6 s limit as for a silent server
    expect(Date.now() - start).toBeLessThan(3000);
    // NXDOMAIN stays "does not resolve"
    await expect(publicLookupAll('nowhere.example', { timeoutMs: 2000, servers: [server.address] })).resolves.toEqual([]);
  }, 15_000);

  it('a name c-ares refuses to ask (a label over 63 characters) is the URL\'s fault, not a DNS failure', async () => {
    const err = await validateWebhookUrl(`https://${'a'.repeat(70)}.example/in`, policy).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(WebhookUrlError);
    expect(err).not.toBeInstanceOf(WebhookDnsError);
    expect((err as Error).message).toBe('host does not resolve to a public address');
  });

  it('hung lookups do not hold up the thread pool: OS lookups and other names resolve meanwhile', async () => {
    const before = server.queries.length;
    // the real path (resolveAndCheck, defaultLookupAll, the policy's servers) for a name that is not localhost
    let hungSettled = 0;
    const hung = Array.from({ length: 8 }, () =>
      resolveAndCheck(new URL('https://hung.example/in'), policy, { timeoutMs: 3000 })
        .catch((e: unknown) => e)
        .finally(() => hungSettled++),
    );
    await dns.promises.lookup('localhost');
    expect(await resolveAndCheck(new URL('https://public.example/in'), policy)).toHaveLength(2);
    // both answered meanwhile: while every hung lookup was still waiting (not behind them)
    expect(hungSettled).toBe(0);
    // asked of the configured server (getaddrinfo would ask the system's, or block a pool thread each)
    expect(server.queries.slice(before).filter((q) => q.name === 'hung.example' && q.type === 1).length).toBeGreaterThanOrEqual(8);
    for (const e of await Promise.all(hung)) expect(e).toBeInstanceOf(WebhookDnsError);
    expect(hungSettled).toBe(8);
  }, 15_000);
});
