import { isIPv4, isIPv6 } from 'node:net';
import type { ClientHasher } from '../crypto/client-hash';

/**
 * The client a per-address limit counts, in one spelling: an IPv4 address as is (also when it
 * arrives IPv4-mapped, `::ffff:a.b.c.d`), an IPv6 address as its /64 (the smallest allocation a
 * subscriber gets: one host can rotate through 2^64 addresses, so counting single addresses
 * would let it walk past every limit). Zero-padding, case and `::` compression do not matter:
 * the address is parsed by the WHATWG URL parser. A port a proxy may have appended
 * (`a.b.c.d:port`, `[v6]:port`) and IPv6 brackets are dropped. Anything else that is not an
 * address (`010.002.000.001`, `a.b.c.d.`, `unknown`) is one shared client, `invalid`: other
 * spellings of one address must not each get a budget of their own.
 */
export function addressKey(given: string): string {
  const ip = withoutPort(given.trim());
  if (isIPv4(ip)) return ip;
  if (!isIPv6(ip)) return INVALID;
  const groups = expandIPv6(new URL(`http://[${ip.split('%')[0]}]/`).hostname.slice(1, -1));
  if (!groups) return INVALID;
  if (groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff) {
    return [groups[6] >> 8, groups[6] & 0xff, groups[7] >> 8, groups[7] & 0xff].join('.');
  }
  return `${groups.slice(0, 4).map((g) => g.toString(16)).join(':')}::/64`;
}

const INVALID = 'invalid';

/** `a.b.c.d:port` as `a.b.c.d`, `[v6]` and `[v6]:port` as `v6`; anything else as given. */
function withoutPort(ip: string): string {
  const bracketed = /^\[([^\]]+)\](?::\d{1,5})?$/.exec(ip);
  if (bracketed) return bracketed[1];
  const v4 = /^([\d.]+):\d{1,5}$/.exec(ip);
  return v4 ? v4[1] : ip;
}

/**
 * The per-address counter's subject as it appears in Redis keys: the keyed hash prefix of
 * `addressKey` (ClientHasher), never the address itself.
 */
export function addressSubject(hasher: ClientHasher, ip: string): string {
  return hasher.prefix(addressKey(ip));
}

/** Eight 16-bit groups of a canonical IPv6 text (hex groups, at most one `::`, no dotted quad). */
function expandIPv6(text: string): number[] | undefined {
  const [head, tail, extra] = text.split('::');
  if (extra !== undefined) return undefined;
  const h = head ? head.split(':') : [];
  const t = tail === undefined ? [] : tail ? tail.split(':') : [];
  const missing = 8 - h.length - t.length;
  if (tail === undefined ? missing !== 0 : missing < 1) return undefined;
  const parts = [...h, ...Array<string>(tail === undefined ? 0 : missing).fill('0'), ...t].map((g) => parseInt(g, 16));
  return parts.length === 8 && parts.every((n) => Number.isInteger(n) && n >= 0 && n <= 0xffff) ? parts : undefined;
}
