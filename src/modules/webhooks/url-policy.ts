import * as dns from 'dns';
import { BlockList, isIP, LookupFunction } from 'net';
import type { AppConfig } from '../../config/config';

/**
 * Where a webhook may point (contract "Agents and OAuth"): in production https only, and never
 * to an address that is loopback, private, link-local or otherwise not publicly routable.
 * Under NODE_ENV development or test, loopback addresses are allowed too, over http or https.
 * Checked at registration and again at each delivery (every address the host resolves to; the
 * connection then uses the address that was checked, so DNS rebinding cannot slip past).
 */
export interface WebhookUrlPolicy {
  allowLoopback: boolean;
  /** DNS servers host names are resolved with (WEBHOOK_DNS_SERVERS); empty: the system's (resolv.conf) */
  dnsServers?: readonly string[];
}

/** The policy of this deployment; the DNS servers are the list loadConfig parsed and checked at boot. */
export function urlPolicyFor(config: Pick<AppConfig, 'isProduction'> & Partial<Pick<AppConfig, 'webhookDnsServers'>>): WebhookUrlPolicy {
  const dnsServers = config.webhookDnsServers ?? [];
  return { allowLoopback: !config.isProduction, ...(dnsServers.length ? { dnsServers } : {}) };
}

export type AddressClass = 'public' | 'loopback' | 'private' | 'link_local' | 'reserved';

/** A URL or address the policy refuses; `message` is safe to show and to log (no addresses). */
export class WebhookUrlError extends Error {
  readonly code = 'EWEBHOOKURL';
}

/**
 * The host name could not be checked: its DNS lookup did not end in time (`timeout`) or failed
 * otherwise (`failed`: SERVFAIL, REFUSED, a resolver that cannot be reached; not "no such name").
 * At a delivery, a failed attempt like any other; at registration, `timeout` is a 400 like an
 * unresolvable host and `failed` a 503 (create-webhook.handler.ts).
 */
export class WebhookDnsError extends WebhookUrlError {
  constructor(
    readonly reason: 'timeout' | 'failed',
    readonly timeoutMs: number,
  ) {
    super(reason === 'timeout' ? `host did not resolve within ${timeoutMs} ms` : 'host does not resolve (dns lookup failed)');
  }
}

export const MAX_URL_LENGTH = 2048;

const ranges: [AddressClass, string, number, 'ipv4' | 'ipv6'][] = [
  ['loopback', '127.0.0.0', 8, 'ipv4'],
  ['loopback', '::1', 128, 'ipv6'],
  ['private', '10.0.0.0', 8, 'ipv4'],
  ['private', '172.16.0.0', 12, 'ipv4'],
  ['private', '192.168.0.0', 16, 'ipv4'],
  ['private', '100.64.0.0', 10, 'ipv4'], // carrier-grade NAT (RFC 6598)
  ['private', 'fc00::', 7, 'ipv6'], // unique local (RFC 4193)
  ['private', 'fec0::', 10, 'ipv6'], // site-local (deprecated)
  ['private', '64:ff9b:1::', 48, 'ipv6'], // local-use NAT64 (RFC 8215)
  ['link_local', '169.254.0.0', 16, 'ipv4'], // includes cloud metadata endpoints
  ['link_local', 'fe80::', 10, 'ipv6'],
  ['reserved', '0.0.0.0', 8, 'ipv4'],
  ['reserved', '192.0.0.0', 24, 'ipv4'],
  ['reserved', '192.0.2.0', 24, 'ipv4'],
  ['reserved', '198.18.0.0', 15, 'ipv4'],
  ['reserved', '198.51.100.0', 24, 'ipv4'],
  ['reserved', '203.0.113.0', 24, 'ipv4'],
  ['reserved', '224.0.0.0', 4, 'ipv4'], // multicast
  ['reserved', '240.0.0.0', 4, 'ipv4'], // reserved, broadcast
  ['reserved', '::', 128, 'ipv6'],
  ['reserved', '100::', 64, 'ipv6'], // discard
  ['reserved', '2001::', 32, 'ipv6'], // Teredo
  ['reserved', '2001:db8::', 32, 'ipv6'], // documentation
  ['reserved', '3fff::', 20, 'ipv6'], // documentation (RFC 9637)
  ['reserved', '2001:2::', 48, 'ipv6'], // benchmarking (RFC 5180)
  ['reserved', '2001:10::', 28, 'ipv6'], // ORCHID (RFC 4843, deprecated)
  ['reserved', '2001:20::', 28, 'ipv6'], // ORCHIDv2 (RFC 7343)
  ['reserved', '5f00::', 16, 'ipv6'], // SRv6 SIDs (RFC 9602)
  ['reserved', '100:0:0:1::', 64, 'ipv6'], // dummy prefix (RFC 9780)
  ['reserved', 'ff00::', 8, 'ipv6'], // multicast
];

const lists = new Map<AddressClass, BlockList>();
for (const [cls, net, prefix, family] of ranges) {
  if (!lists.has(cls)) lists.set(cls, new BlockList());
  lists.get(cls)!.addSubnet(net, prefix, family);
}

/** Expands an IPv6 address into its 16 bytes (undefined when it is not one). */
function ipv6Bytes(ip: string): Buffer | undefined {
  if (isIP(ip) !== 6) return undefined;
  let s = ip.split('%')[0];
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(s);
  if (dotted) {
    const [a, b, c, d] = dotted[1].split('.').map(Number);
    s = s.slice(0, -dotted[1].length) + `${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = s.split('::');
  const h = head ? head.split(':') : [];
  const t = tail !== undefined && tail ? tail.split(':') : [];
  const groups = tail === undefined ? h : [...h, ...Array(8 - h.length - t.length).fill('0'), ...t];
  const out = Buffer.alloc(16);
  groups.forEach((g, i) => out.writeUInt16BE(parseInt(g, 16), i * 2));
  return out;
}

/**
 * The IPv4 address a NAT64 (64:ff9b::/96), 6to4 (2002::/16), IPv4-compatible (::/96, deprecated)
 * or IPv4-translated (::ffff:0:0/96, SIIT) address embeds.
 */
function embeddedIpv4(ip: string): string | undefined {
  const b = ipv6Bytes(ip);
  if (!b) return undefined;
  if (b.readUInt32BE(0) === 0x0064ff9b && b.readUInt32BE(4) === 0 && b.readUInt32BE(8) === 0) return [...b.subarray(12, 16)].join('.');
  // ::a.b.c.d (not :: or ::1, which are their own) and ::ffff:0:a.b.c.d
  const compatible = b.readUInt32BE(8) === 0 && b.readUInt32BE(12) > 1;
  if (b.readUInt32BE(0) === 0 && b.readUInt32BE(4) === 0 && (compatible || b.readUInt32BE(8) === 0xffff0000)) return [...b.subarray(12, 16)].join('.');
  if (b.readUInt16BE(0) === 0x2002) return [...b.subarray(2, 6)].join('.');
  return undefined;
}

/** The class of an IP address (IPv4-mapped, NAT64 and 6to4 forms classified by their IPv4). */
export function classifyAddress(ip: string): AddressClass {
  const family = isIP(ip);
  if (!family) return 'reserved';
  const type = family === 4 ? 'ipv4' : 'ipv6';
  const inner = family === 6 ? embeddedIpv4(ip) : undefined;
  if (inner) return classifyAddress(inner);
  for (const cls of ['loopback', 'private', 'link_local', 'reserved'] as const) {
    if (lists.get(cls)!.check(ip, type)) return cls;
  }
  return 'public';
}

/** Whether the policy lets a request go to this address; `http` needs every address loopback. */
function addressAllowed(cls: AddressClass, policy: WebhookUrlPolicy, http: boolean): boolean {
  if (http) return policy.allowLoopback && cls === 'loopback';
  return cls === 'public' || (policy.allowLoopback && cls === 'loopback');
}

const NOT_ALLOWED = 'must not resolve to a loopback, private, link-local or reserved address';
/**
 * A host name that does not resolve and one that resolves to an address the policy refuses get
 * this one answer (at registration and in the delivery log): two answers would let a tenant list
 * the names of the platform's private DNS (`*.svc.cluster.local`, a private zone) one registration
 * at a time (OWASP SSRF prevention: no distinguishable errors for internal targets). An IP literal
 * reveals nothing and is told precisely (NOT_ALLOWED).
 */
const NAME_NOT_PUBLIC = 'host does not resolve to a public address';

/** Throws WebhookUrlError unless every resolved address is allowed for this URL. */
export function checkAddresses(url: URL, addresses: string[], policy: WebhookUrlPolicy): void {
  const named = !isIP(hostOf(url));
  if (!addresses.length) throw new WebhookUrlError(NAME_NOT_PUBLIC);
  const http = url.protocol === 'http:';
  for (const a of addresses) {
    const cls = classifyAddress(a);
    if (!addressAllowed(cls, policy, http)) {
      throw new WebhookUrlError(http && cls === 'public' ? 'must use https' : named ? NAME_NOT_PUBLIC : NOT_ALLOWED);
    }
  }
}

/** The URL's host as dns.lookup and net.isIP expect it (IPv6 literals without brackets). */
export function hostOf(url: URL): string {
  return url.hostname.replace(/^\[(.*)\]$/, '$1');
}

/** The checks that need no DNS: syntax, scheme, credentials, fragment, length. */
export function parseWebhookUrl(raw: string, policy: WebhookUrlPolicy): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new WebhookUrlError('must be an absolute http(s) URL');
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new WebhookUrlError('must be an absolute http(s) URL');
  if (url.protocol === 'http:' && !policy.allowLoopback) throw new WebhookUrlError('must use https');
  if (!hostOf(url)) throw new WebhookUrlError('must have a host');
  // WHATWG keeps an explicit port 0 (only the scheme's default port is dropped): nothing listens there
  if (url.port === '0') throw new WebhookUrlError('must not use port 0');
  if (url.username || url.password) throw new WebhookUrlError('must not contain credentials');
  if (url.hash) throw new WebhookUrlError('must not contain a fragment');
  return url;
}

/** How long a lookup may take and what ends it early (an attempt's deadline). */
export interface LookupContext {
  timeoutMs: number;
  signal?: AbortSignal;
  /** DNS servers to ask (WebhookUrlPolicy.dnsServers); unset: the system's */
  servers?: readonly string[];
}

/** Resolves every address of a host name; rejects with WebhookDnsError when it cannot tell. */
export type LookupAll = (hostname: string, ctx: LookupContext) => Promise<dns.LookupAddress[]>;

/** How long a lookup at registration may take. */
export const REGISTRATION_DNS_TIMEOUT_MS = 3000;

/** DNS answers meaning "this name has no address of that family" (not a failure to find out). */
const NO_ADDRESS = new Set(['ENODATA', 'ENOTFOUND', 'NOTFOUND', 'ENONAME']);
/** c-ares refusing the name itself before asking (e.g. a label over 63 characters): the URL's fault. */
const BAD_NAME = new Set(['EBADNAME', 'EBADQUERY']);

/**
 * A and AAAA records of a host name through c-ares (dns.Resolver): network I/O on the event loop,
 * not getaddrinfo on libuv's small thread pool, where a name whose DNS never answers would hold a
 * thread and make every other lookup of the process (the database's, Redis', SMTP's) wait behind
 * it. One resolver per lookup, cancelled at the deadline or when `signal` aborts, so no query
 * outlives its attempt. Both families must answer (or say "none"): every record is checked.
 * Does not read /etc/hosts.
 */
export const publicLookupAll: LookupAll = async (hostname, ctx) => {
  // ended before it began (the attempt's deadline already passed): resolver.cancel() only ends
  // queries already sent, so none is sent
  if (ctx.signal?.aborted) throw new WebhookDnsError('timeout', ctx.timeoutMs);
  // c-ares doubles the timeout on each retry: timeout + 2 x timeout fits the budget
  const resolver = new dns.promises.Resolver({ timeout: Math.max(50, Math.floor(ctx.timeoutMs / 3)), tries: 2 });
  if (ctx.servers?.length) resolver.setServers([...ctx.servers]);
  let timedOut = false;
  const cancel = () => {
    timedOut = true;
    resolver.cancel();
  };
  const timer = setTimeout(cancel, ctx.timeoutMs);
  ctx.signal?.addEventListener('abort', cancel, { once: true });
  try {
    const answers = await Promise.allSettled([resolver.resolve4(hostname), resolver.resolve6(hostname)]);
    const addresses: dns.LookupAddress[] = [];
    for (const [i, a] of answers.entries()) {
      if (a.status === 'fulfilled') addresses.push(...a.value.map((address) => ({ address, family: i === 0 ? 4 : 6 })));
      else {
        const code = String((a.reason as NodeJS.ErrnoException)?.code ?? '');
        if (timedOut || code === 'ETIMEOUT' || code === 'ECANCELLED') throw new WebhookDnsError('timeout', ctx.timeoutMs);
        if (BAD_NAME.has(code)) throw new WebhookUrlError(NAME_NOT_PUBLIC);
        if (!NO_ADDRESS.has(code)) throw new WebhookDnsError('failed', ctx.timeoutMs);
      }
    }
    return addresses;
  } finally {
    clearTimeout(timer);
    ctx.signal?.removeEventListener('abort', cancel);
  }
};

/**
 * The operating system's resolver (getaddrinfo, /etc/hosts first), for `localhost` names only,
 * and only where loopback is allowed (development, test). It cannot be cancelled: its answer
 * is awaited no longer than the budget.
 */
const systemLookupAll: LookupAll = (hostname, ctx) =>
  new Promise((resolve, reject) => {
    const fail = () => reject(new WebhookDnsError('timeout', ctx.timeoutMs));
    if (ctx.signal?.aborted) return fail();
    const timer = setTimeout(fail, ctx.timeoutMs);
    ctx.signal?.addEventListener('abort', fail, { once: true });
    dns.promises.lookup(hostname, { all: true, verbatim: true }).then(resolve, reject).finally(() => {
      clearTimeout(timer);
      ctx.signal?.removeEventListener('abort', fail);
    });
  });

/** `localhost` and names under it, loopback by definition (RFC 6761 6.3). */
export function isLocalhostName(host: string): boolean {
  return /(^|\.)localhost\.?$/i.test(host);
}

/** c-ares for every name, but the system's resolver for `localhost` names (loopback allowed, checked before). */
export const defaultLookupAll: LookupAll = (hostname, ctx) => (isLocalhostName(hostname) ? systemLookupAll : publicLookupAll)(hostname, ctx);

export interface ResolveOptions {
  /** how addresses are found (default: c-ares, or the system for `localhost` names where allowed) */
  lookupAll?: LookupAll;
  /** how long the lookup may take (default REGISTRATION_DNS_TIMEOUT_MS) */
  timeoutMs?: number;
  /** ends the lookup early (cancelled) */
  signal?: AbortSignal;
}

/** Every address the URL's host resolves to, checked against the policy. */
export async function resolveAndCheck(url: URL, policy: WebhookUrlPolicy, opts: ResolveOptions = {}): Promise<dns.LookupAddress[]> {
  const host = hostOf(url);
  let addresses: dns.LookupAddress[];
  if (isIP(host)) addresses = [{ address: host, family: isIP(host) }];
  else {
    // loopback whatever a DNS server says: refused without asking one where loopback is
    if (isLocalhostName(host) && !policy.allowLoopback) throw new WebhookUrlError(NAME_NOT_PUBLIC);
    const lookupAll = opts.lookupAll ?? defaultLookupAll;
    const timeoutMs = opts.timeoutMs ?? REGISTRATION_DNS_TIMEOUT_MS;
    try {
      addresses = await lookupAll(host, { timeoutMs, signal: opts.signal, servers: policy.dnsServers });
    } catch (err) {
      if (err instanceof WebhookUrlError) throw err;
      throw new WebhookUrlError(NAME_NOT_PUBLIC);
    }
  }
  checkAddresses(url, addresses.map((a) => a.address), policy);
  return addresses;
}

/** Full check at registration: syntax, scheme and every resolved address. Returns the URL. */
export async function validateWebhookUrl(raw: string, policy: WebhookUrlPolicy, lookupAll?: LookupAll, opts: Omit<ResolveOptions, 'lookupAll'> = {}): Promise<URL> {
  const url = parseWebhookUrl(raw, policy);
  // at registration only (an endpoint stored before this rule still gets its deliveries; the
  // fragment is never sent): a bare `#` leaves url.hash empty but is kept in the stored form
  if (url.href.includes('#')) throw new WebhookUrlError('must not contain a fragment');
  // at registration only (an endpoint stored before this rule still gets its deliveries): the
  // form stored, answered and requested is percent-encoded, where an emoji takes 12 characters
  if (url.href.length > MAX_URL_LENGTH) throw new WebhookUrlError(`must be at most ${MAX_URL_LENGTH} characters once percent-encoded (as stored)`);
  await resolveAndCheck(url, policy, { ...opts, lookupAll });
  return url;
}

/**
 * A `lookup` for http(s).request that hands the socket the addresses already checked (no
 * second resolution a DNS rebinding could answer differently).
 */
export function pinnedLookup(addresses: dns.LookupAddress[]): LookupFunction {
  return ((_hostname: string, options: dns.LookupOptions, callback: (err: NodeJS.ErrnoException | null, address: string | dns.LookupAddress[], family?: number) => void) => {
    const wanted = options?.family === 4 || options?.family === 6 ? addresses.filter((a) => a.family === options.family) : addresses;
    if (!wanted.length) return callback(Object.assign(new Error('host does not resolve'), { code: 'ENOTFOUND' }), '', 0);
    if (options?.all) return callback(null, wanted);
    callback(null, wanted[0].address, wanted[0].family);
  }) as LookupFunction;
}

/** The URL without its query string, for the owners' emails (a query may carry a token). */
export function displayUrl(url: URL | string): string {
  const u = typeof url === 'string' ? new URL(url) : url;
  return `${u.origin}${u.pathname}`;
}

/**
 * The URL as members (read-only) see it: the origin, then the path as `/REDACTED` unless it is `/`
 * (Slack's and Discord's incoming-webhook URLs carry their secret in the path), then the query,
 * if any, as `?REDACTED` (a token as a value, a name or the whole query); a fragment (stored before
 * they were refused) left out. Only owners, who manage endpoints, see more. Audit records carry
 * this form too: they are kept (by default for ever) and read by more people than the endpoints.
 */
export function redactedUrl(url: string): string {
  const u = new URL(url);
  return `${u.origin}${u.pathname === '/' ? '/' : '/REDACTED'}${u.search ? '?REDACTED' : ''}`;
}
