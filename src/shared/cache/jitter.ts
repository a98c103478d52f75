/**
 * A lifetime drawn from [base - spread x base, base]. Entries written together (the first
 * requests after a deploy or a Redis flush, a burst of sign-ins, the users of one client) would
 * otherwise all expire in the same instant, and their reloads (an RS256 verify each, a row read
 * each) would land on the same few milliseconds: a stall the whole fleet feels at once. Spread
 * over a window, the same work blends into the steady load. Never longer than `base`, so a bound
 * that `base` promises (how stale a cached row may be) still holds.
 */
export function jittered(base: number, spread = 0.2, random: () => number = Math.random): number {
  return base - Math.floor(base * spread * random());
}
