import { Inject, Injectable } from '@nestjs/common';
import Redis from 'ioredis';
import { APP_CONFIG, AppConfig } from '../../config/config';
import { ClientHasher } from '../crypto/client-hash';
import { AppError, RateLimitedError } from '../errors/app-error';
import { execAll } from '../redis/exec-all';
import { REDIS } from '../redis/redis.module';
import { addressSubject } from './address-key';
import { throttlerKeys } from './throttler-storage';

const BUCKET = 'login-fail';

/** The realm of an end user's password sign-in failures (keyed by the account's email key): every check of that password counts in it. */
export const passwordSignInRealm = (tenantId: string): string => `user:${tenantId}`;

/** The kinds of realm (the part before its first `:`): password sign-ins, second factors, email codes, step-up codes, the dashboard. */
const REALM_KINDS = new Set(['user', 'mfa', 'email-code', 'step-up-code', 'dashboard']);

/** authp_rate_limited_total's `limiter` of a refusal in `realm`: `failed_sign_in:<kind>`, never the realm's tenant. */
function throttleLimiter(realm: string): string {
  const kind = realm.split(':', 1)[0];
  return `failed_sign_in:${REALM_KINDS.has(kind) ? kind : 'other'}`;
}

/**
 * How long an address stays known to an account after its last success there (exempt from the
 * account limit): each address is dropped 30 days after it last signed in, on its own.
 */
const TRUSTED_TTL_SECONDS = 30 * 86400;
/**
 * At most this many known addresses per account, the most recent successes: an owner signs in
 * from a handful of addresses a month (home, work, a few mobile-network addresses), and without a
 * cap an account signing in from ever new addresses (mobile churn, a shared account, or someone
 * who has its password) would keep every one of them for 30 days, a set growing without bound.
 * Past the cap the least recently successful address is dropped first: it only loses its
 * exemption from the account limit, never the right to sign in.
 */
export const TRUSTED_MAX_ADDRESSES = 50;
/**
 * The account's known addresses: a sorted set, each address scored by the time (ms) of its last
 * success. Named apart from the former `login-trusted:<account>` (legacyTrustedKey), a plain SET
 * that ZADD and ZSCORE would refuse with WRONGTYPE.
 */
const trustedKey = (acct: string): string => `login-trusted:z:${acct}`;
/**
 * The former known addresses of an account: a plain SET without a time per address, its TTL
 * (30 days) renewed by every success. Still read, never written: an address known there before the
 * deploy keeps its exemption until the key expires by itself, 30 days after the account's last
 * success under the former code at most. Remove this fallback (and the script's KEYS[8]) once
 * every such key has expired: 30 days after no process runs the former code any more.
 */
const legacyTrustedKey = (acct: string): string => `login-trusted:${acct}`;

/**
 * An erased account's known addresses (forgetAccounts): the set holds only this member for
 * ERASED_HOLD_SECONDS, and no address is added meanwhile. A sign-in that proved the password just
 * before the erasure committed records its address after it (the argon2 check lies between its read
 * and its record); without the hold that address would pass to a new account of the same address
 * for 30 days. No address hashes to it (they are hex), and nothing reads it but TRUST_SCRIPT.
 */
const ERASED_MEMBER = '~erased';
/** Far longer than a sign-in takes from its read of the account to its record of the address. */
export const ERASED_HOLD_SECONDS = 300;

/**
 * Records a success of the address for the account (trust), unless the account was just erased
 * (ARGV[6] '1': an account created since, whose mark it ends): KEYS[1] the known addresses; ARGV:
 * now (ms), the address, the oldest score kept, the cap, the TTL (s), whether the account is new.
 */
const TRUST_SCRIPT = `
if ARGV[6] == '1' then redis.call('ZREM', KEYS[1], '${ERASED_MEMBER}')
elseif redis.call('ZSCORE', KEYS[1], '${ERASED_MEMBER}') then return 0 end
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[3])
redis.call('ZREMRANGEBYRANK', KEYS[1], 0, -(tonumber(ARGV[4]) + 1))
redis.call('EXPIRE', KEYS[1], ARGV[5])
return 1`;
const TRUST_COMMAND = 'authpLoginTrust';
/** Replaces the known addresses with the erased mark: KEYS[1] the set; ARGV: now (ms), the hold (s). */
const ERASE_SCRIPT = `
redis.call('DEL', KEYS[1])
redis.call('ZADD', KEYS[1], ARGV[1], '${ERASED_MEMBER}')
return redis.call('EXPIRE', KEYS[1], ARGV[2])`;

/** A realm's limits: failures per (account, address) pair, per account and per address in the window. */
export interface ThrottleLimits {
  perAccountIp: number;
  perAccount: number;
  perIp: number;
  windowSeconds: number;
}

/**
 * How long an attempt may stay "being judged" at most (its pending count expires then, should the
 * process judging it die): far longer than a password hash or a code check takes.
 */
const PENDING_TTL_MS = 30_000;

/**
 * The wait (ms) answered when a counter is at its limit only through attempts still being judged
 * (parallel requests: each is counted before any is evaluated): they end within moments, and
 * then either take their count back (a right credential) or leave a real block with its own
 * Retry-After. Telling the client to wait the whole window would lock an honest burst out.
 */
export const PENDING_WAIT_MS = 1_000;

/**
 * Counts an attempt before it is evaluated, atomically: refused (the longest remaining wait, in
 * ms) when a counter is at its limit, else every counter gains one. Each counter has a pending
 * twin, the attempts counted in it that are still being judged: a counter at its limit only
 * through pending attempts answers PENDING_WAIT_MS, not the rest of its window. KEYS: pair,
 * account and address counters, the account's known addresses (trustedKey), then the three pending
 * counters, then the account's former known addresses (legacyTrustedKey). ARGV: pair, account and
 * address limits, window (ms), this address, pending TTL (ms), pending wait (ms), the oldest last
 * success (ms) that still trusts an address. The account limit does not apply to a trusted
 * address: one in the account's sorted set with a score (its last success) no older than that, or
 * one still in the former set.
 */
const ATTEMPT_SCRIPT = `
local limits = { tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]) }
local window = tonumber(ARGV[4])
local since = redis.call('ZSCORE', KEYS[4], ARGV[5])
local trusted = (since and tonumber(since) >= tonumber(ARGV[8])) or redis.call('SISMEMBER', KEYS[8], ARGV[5]) == 1
local wait = 0
for i = 1, 3 do
  if not (i == 2 and trusted) then
    local count = tonumber(redis.call('GET', KEYS[i]) or '0')
    if count >= limits[i] then
      local left
      if count - tonumber(redis.call('GET', KEYS[i + 4]) or '0') < limits[i] then
        left = tonumber(ARGV[7])
      else
        left = redis.call('PTTL', KEYS[i])
        -- a counter without an expiry (left by an older writer) would block for ever: give it one
        if left < 0 then
          left = window
          redis.call('PEXPIRE', KEYS[i], window)
        end
      end
      if left > wait then wait = left end
    end
  end
end
if wait > 0 then return wait end
for i = 1, 3 do
  redis.call('INCR', KEYS[i])
  redis.call('PEXPIRE', KEYS[i], window, 'NX')
  redis.call('INCR', KEYS[i + 4])
  -- from its first attempt on, not renewed: a count a crash never took back lingers 30 s at most
  redis.call('PEXPIRE', KEYS[i + 4], ARGV[6], 'NX')
end
return 0`;
const ATTEMPT_COMMAND = 'authpLoginAttempt';

/**
 * An attempt was judged or ended. KEYS: pair, account, address counters, then their pending
 * twins. ARGV: `clear` when the attempt succeeded (its count goes, and the pair's earlier
 * failures too), `release` when it ended before any credential was judged (only its own count
 * goes), `failed` when its credential was wrong (its count stays: only its pending mark goes).
 * Never below zero.
 */
const SETTLE_SCRIPT = `
if ARGV[1] == 'clear' then redis.call('DEL', KEYS[1]) end
for i = 1, 3 do
  if ARGV[1] ~= 'failed' then
    local count = tonumber(redis.call('GET', KEYS[i]) or '0')
    if count > 0 then redis.call('DECR', KEYS[i]) end
  end
  local pending = tonumber(redis.call('GET', KEYS[i + 3]) or '0')
  if pending > 0 then redis.call('DECR', KEYS[i + 3]) end
end
return 0`;
const SETTLE_COMMAND = 'authpLoginSettle';

type Script = (...args: (string | number)[]) => Promise<number>;

/** The oldest last success (ms) that still makes an address known to an account, at `now` (ms). */
const trustedSince = (now: number): number => now - TRUSTED_TTL_SECONDS * 1000;

/**
 * Failed sign-in throttling (end users and dashboard, passwords and second factors), per OWASP
 * "Authentication": counts failures per (account, address) pair, per account and per address
 * within a window.
 *
 * - the pair limit stops one address guessing one account;
 * - the address limit stops one address spraying many accounts;
 * - the account limit stops a distributed attack on one account, but it is not applied to
 *   addresses that signed in to that account successfully within the last 30 days (its
 *   TRUSTED_MAX_ADDRESSES most recent ones), so an attacker who exhausts it cannot lock the
 *   owner out. Every block ends with its window (Retry-After).
 *
 * An attempt is counted as a failure when it starts (`attempt`, one atomic step) and taken back
 * when it succeeds (`succeeded`): attempts sent in parallel are each counted before any of them
 * is evaluated, so a burst cannot have more passwords checked than the limits allow. Until it is
 * judged (`failed`, `succeeded`, or `release` when nothing was judged) it is also pending: a
 * refusal caused only by pending attempts answers Retry-After 1 s (PENDING_WAIT_MS), since they
 * may all turn out right, while a refusal by judged failures answers the rest of the window. Unknown and known accounts
 * are counted the same way, so throttling reveals nothing. Redis unreachable: 503 (fail closed).
 */
@Injectable()
export class LoginThrottleService {
  private readonly attemptCmd: Script;
  private readonly settleCmd: Script;
  private readonly trustCmd: Script;

  constructor(
    @Inject(REDIS) private readonly redis: Redis,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly hasher: ClientHasher,
  ) {
    if (!(ATTEMPT_COMMAND in redis)) redis.defineCommand(ATTEMPT_COMMAND, { numberOfKeys: 8, lua: ATTEMPT_SCRIPT });
    if (!(SETTLE_COMMAND in redis)) redis.defineCommand(SETTLE_COMMAND, { numberOfKeys: 6, lua: SETTLE_SCRIPT });
    this.attemptCmd = (redis as unknown as Record<string, Script>)[ATTEMPT_COMMAND].bind(redis);
    this.settleCmd = (redis as unknown as Record<string, Script>)[SETTLE_COMMAND].bind(redis);
    if (!(TRUST_COMMAND in redis)) redis.defineCommand(TRUST_COMMAND, { numberOfKeys: 1, lua: TRUST_SCRIPT });
    this.trustCmd = (redis as unknown as Record<string, Script>)[TRUST_COMMAND].bind(redis);
  }

  /** The login throttle's limits (LOGIN_FAILURES_*), the default of every realm. */
  private loginLimits(): ThrottleLimits {
    const c = this.config;
    return { perAccountIp: c.LOGIN_FAILURES_PER_ACCOUNT_IP, perAccount: c.LOGIN_FAILURES_PER_ACCOUNT, perIp: c.LOGIN_FAILURES_PER_IP, windowSeconds: c.LOGIN_FAILURE_WINDOW_SECONDS };
  }

  private accountSubject(realm: string, account: string): string {
    return this.hasher.subject(`${realm}:${account}`);
  }

  private counter(k: string): string {
    return throttlerKeys(`rl:${k}`, BUCKET).hits;
  }

  private keys(realm: string, account: string, ip: string) {
    const acct = this.accountSubject(realm, account);
    const addr = addressSubject(this.hasher, ip);
    const counters = [this.counter(`pair:${acct}:${addr}`), this.counter(`acct:${acct}`), this.counter(`ip:${realm.split(':')[0]}:${addr}`)];
    return { counters, pending: counters.map((c) => `${c}:pending`), trusted: trustedKey(acct), legacyTrusted: legacyTrustedKey(acct), addr };
  }

  /**
   * Starts an attempt: counts it as a failure, or throws 429 auth/login_throttled (counting
   * nothing) when it must not even be evaluated. End it with `succeeded` (a right credential),
   * `failed` (a wrong one) or `release` (none was judged). `limits`: the realm's own (default: the
   * LOGIN_FAILURES_* settings).
   */
  async attempt(realm: string, account: string, ip: string, limits: ThrottleLimits = this.loginLimits()): Promise<void> {
    const k = this.keys(realm, account, ip);
    let waitMs: number;
    try {
      waitMs = await this.attemptCmd(
        ...k.counters,
        k.trusted,
        ...k.pending,
        k.legacyTrusted,
        limits.perAccountIp,
        limits.perAccount,
        limits.perIp,
        limits.windowSeconds * 1000,
        k.addr,
        PENDING_TTL_MS,
        PENDING_WAIT_MS,
        trustedSince(Date.now()),
      );
    } catch (e) {
      // no answer in REDIS_COMMAND_TIMEOUT_MS (a stalled Redis): the script was sent and may still
      // run once Redis resumes, counting an attempt this request never judged (the caller gets 503).
      // Its take-back goes after it on the same connection, so it runs after it, in order.
      if ((e as Error).message === 'Command timed out') void this.settleCmd(...k.counters, ...k.pending, 'release').catch(() => undefined);
      throw new AppError('server/unavailable', 'Rate limiter unavailable');
    }
    if (waitMs > 0) throw new RateLimitedError(throttleLimiter(realm), Math.ceil(waitMs / 1000), 'auth/login_throttled');
  }

  /**
   * The attempt started with `attempt` succeeded: its count is taken back, the pair's failures
   * cleared, and the address is known for the account (`trust: false`: only the counting, for a
   * success that signed no account in, which must answer as a sign-in does without its effect).
   */
  async succeeded(realm: string, account: string, ip: string, opts: { trust?: boolean } = {}): Promise<void> {
    const k = this.keys(realm, account, ip);
    await Promise.all([this.settleCmd(...k.counters, ...k.pending, 'clear').catch(() => undefined), opts.trust === false ? undefined : this.trust(k)]);
  }

  /** The attempt started with `attempt` was judged wrong: it stays counted, no longer pending. */
  async failed(realm: string, account: string, ip: string): Promise<void> {
    const k = this.keys(realm, account, ip);
    await this.settleCmd(...k.counters, ...k.pending, 'failed').catch(() => undefined);
  }

  /**
   * One credential check, counted: `attempt`, then `check` (what the right credential proves, e.g.
   * its account, or true; false or undefined when it is wrong), then a right one `succeeded`, a
   * wrong one stays counted. A check that fails before it judged anything (PostgreSQL unreachable,
   * a timeout) takes its attempt back: an outage never counts the attempts of people typing their
   * right password as failures, nor locks them out after it.
   */
  async judge<T>(
    realm: string,
    account: string,
    ip: string,
    check: () => Promise<T | false | undefined>,
    opts: { trust?: boolean; limits?: ThrottleLimits } = {},
  ): Promise<T | undefined> {
    await this.attempt(realm, account, ip, opts.limits);
    let verdict: T | false | undefined;
    try {
      verdict = await check();
    } catch (e) {
      await this.release(realm, account, ip);
      throw e;
    }
    if (!verdict) {
      await this.failed(realm, account, ip);
      return undefined;
    }
    await this.succeeded(realm, account, ip, opts);
    return verdict;
  }

  /**
   * The attempt started with `attempt` ended before any credential was judged (MFA not set up or
   * already enabled, a challenge gone): its count goes, nothing else changes.
   */
  async release(realm: string, account: string, ip: string): Promise<void> {
    const k = this.keys(realm, account, ip);
    await this.settleCmd(...k.counters, ...k.pending, 'release').catch(() => undefined);
  }

  /**
   * The account was just created from this address with its password (registration, signup, an
   * accepted invitation): the address is known for the account and its pair starts clean; an
   * erased account's mark of the same address (forgetAccounts) ends.
   */
  async trustAddress(realm: string, account: string, ip: string): Promise<void> {
    const k = this.keys(realm, account, ip);
    await Promise.all([this.redis.del(k.counters[0], k.pending[0]).catch(() => undefined), this.trust(k, true)]);
  }

  /**
   * The account was taken over by a proof of its mailbox (a password reset): the addresses it
   * knew are forgotten and only this one is known. Whoever registered the address before its
   * owner (pre-account hijacking) keeps no address exempt from the account-wide limit; the
   * owner's other devices are known again at their next success.
   */
  async restartKnownAddresses(realm: string, account: string, ip: string): Promise<void> {
    const k = this.keys(realm, account, ip);
    await execAll(this.redis.pipeline().del(k.trusted).del(k.legacyTrusted)).catch(() => undefined);
    await this.trustAddress(realm, account, ip);
  }

  /**
   * Whether this address succeeded for the account within the last 30 days and is still among its
   * known addresses (it is exempt from the account limit); false when Redis cannot tell.
   */
  async isKnownAddress(realm: string, account: string, ip: string): Promise<boolean> {
    const k = this.keys(realm, account, ip);
    const res = await execAll(this.redis.pipeline().zscore(k.trusted, k.addr).sismember(k.legacyTrusted, k.addr)).catch(() => undefined);
    if (!res) return false;
    const since = res[0][1] as string | null;
    return (since !== null && Number(since) >= trustedSince(Date.now())) || res[1][1] === 1;
  }

  /**
   * Forgets what the throttle keeps of these accounts (an erasure: GDPR Art. 17), each a realm and
   * the account it is counted under: its known addresses (keyed hashes of client addresses, kept 30
   * days after their last success), in the sorted set and the former plain set, and its account-wide
   * failure counter with its pending twin. Keyed by the account's name in its realm (an end user's
   * email key), they would otherwise pass to a new account of the same address: the erased person's
   * addresses exempt from its account limit, their failures counting against its owner. The pair
   * counters (account and address) are not found without scanning the keyspace: they hold a count
   * of one address's failures and expire with the realm's window (LOGIN_FAILURE_WINDOW_SECONDS).
   * The known addresses are replaced by the erased mark for ERASED_HOLD_SECONDS (a sign-in in
   * flight records none after the erasure). One command per key (no two keys in one slot), every
   * reply checked: throws 503 server/unavailable when Redis refused any of them.
   */
  async forgetAccounts(accounts: readonly { realm: string; account: string }[]): Promise<void> {
    if (!accounts.length) return;
    const pipe = this.redis.pipeline();
    for (const { realm, account } of accounts) {
      const acct = this.accountSubject(realm, account);
      const counter = this.counter(`acct:${acct}`);
      for (const key of [counter, `${counter}:pending`, legacyTrustedKey(acct)]) pipe.del(key);
      // one script: a trust in between would see the set empty, not erased
      pipe.eval(ERASE_SCRIPT, 1, trustedKey(acct), Date.now(), ERASED_HOLD_SECONDS);
    }
    await execAll(pipe).catch((cause: unknown) => {
      throw new AppError('server/unavailable', 'Rate limiter unavailable', { cause });
    });
  }

  /**
   * Records a success of the address for the account, in one script (TRUST_SCRIPT): its score
   * becomes now, addresses whose last success is older than TRUSTED_TTL_SECONDS go, then all but the
   * TRUSTED_MAX_ADDRESSES most recent; the set itself expires TRUSTED_TTL_SECONDS after the
   * account's last success. Nothing while the account's erased mark holds (forgetAccounts), but for
   * the address that just created an account of it (trustAddress: the mark goes).
   */
  private async trust(k: { trusted: string; addr: string }, newAccount = false): Promise<void> {
    const now = Date.now();
    await this.trustCmd(k.trusted, now, k.addr, trustedSince(now), TRUSTED_MAX_ADDRESSES, TRUSTED_TTL_SECONDS, newAccount ? '1' : '0').catch(() => undefined);
  }
}
