import { Inject, Injectable } from '@nestjs/common';
import Redis from 'ioredis';
import { APP_CONFIG, AppConfig } from '../../config/config';
import { ClientHasher } from '../crypto/client-hash';
import { sha256Hex } from '../crypto/tokens';
import { RateLimitedError } from '../errors/app-error';
import { REDIS } from '../redis/redis.module';
import { RateLimitService } from './rate-limit.service';
import { addressSubject } from './address-key';

const BUCKET = 'login-fail';
const TRUSTED_TTL_SECONDS = 30 * 86400;

/**
 * Failed sign-in throttling (end users and dashboard), per OWASP "Authentication": counts
 * failures per (account, address) pair, per account and per address within a window.
 *
 * - the pair limit stops one address guessing one account;
 * - the address limit stops one address spraying many accounts;
 * - the account limit stops a distributed attack on one account, but it is not applied to
 *   addresses that signed in to that account successfully before, so an attacker who
 *   exhausts it cannot lock the owner out. Every block ends with its window (Retry-After).
 *
 * Unknown and known accounts are counted the same way, so throttling reveals nothing.
 */
@Injectable()
export class LoginThrottleService {
  constructor(
    private readonly limiter: RateLimitService,
    @Inject(REDIS) private readonly redis: Redis,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly hasher: ClientHasher,
  ) {}

  private keys(realm: string, account: string, ip: string) {
    const acct = sha256Hex(`${realm}:${account}`).slice(0, 32);
    const addr = addressSubject(this.hasher, ip);
    return { pair: `pair:${acct}:${addr}`, account: `acct:${acct}`, ip: `ip:${realm.split(':')[0]}:${addr}`, trusted: `login-trusted:${acct}`, addr };
  }

  /** Throws 429 auth/login_throttled when this attempt must not even be evaluated. */
  async check(realm: string, account: string, ip: string): Promise<void> {
    const k = this.keys(realm, account, ip);
    const [[pair, acct, addr], trusted] = await Promise.all([
      this.limiter.peek(BUCKET, [k.pair, k.account, k.ip]),
      this.redis.sismember(k.trusted, k.addr).catch(() => 0),
    ]);
    const blocked: number[] = [];
    if (pair.count >= this.config.LOGIN_FAILURES_PER_ACCOUNT_IP) blocked.push(pair.ttlSeconds);
    if (addr.count >= this.config.LOGIN_FAILURES_PER_IP) blocked.push(addr.ttlSeconds);
    if (acct.count >= this.config.LOGIN_FAILURES_PER_ACCOUNT && !trusted) blocked.push(acct.ttlSeconds);
    if (blocked.length) throw new RateLimitedError(Math.max(...blocked), 'auth/login_throttled');
  }

  async recordFailure(realm: string, account: string, ip: string): Promise<void> {
    const k = this.keys(realm, account, ip);
    await this.limiter.addHits(BUCKET, [k.pair, k.account, k.ip], this.config.LOGIN_FAILURE_WINDOW_SECONDS);
  }

  /** A success clears the pair's failures and remembers the address as known for the account. */
  async recordSuccess(realm: string, account: string, ip: string): Promise<void> {
    const k = this.keys(realm, account, ip);
    await Promise.all([
      this.limiter.reset(BUCKET, [k.pair]),
      this.redis.pipeline().sadd(k.trusted, k.addr).expire(k.trusted, TRUSTED_TTL_SECONDS).exec().catch(() => undefined),
    ]);
  }
}
