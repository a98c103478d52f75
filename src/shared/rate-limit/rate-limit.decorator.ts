import { SetMetadata } from '@nestjs/common';
import { AppConfig } from '../../config/config';
import { ErrorCode } from '../errors/error-codes';

/** What a limit counts by: the client address, or the X-API-Key presented when it is a live key (RateLimitGuard). */
export type LimitSubject = 'ip' | 'api_key';

export interface RateLimitRule {
  bucket: string;
  by: LimitSubject;
  limit: (config: AppConfig) => number;
  windowSeconds: number;
  code?: ErrorCode;
  /**
   * Count only requests whose body passes the route's validation (a request refused with 400 uses
   * none of this limit). For limits shared by many clients (per API key), so that malformed
   * requests of one client do not use up the others' allowance.
   */
  validBodyOnly?: boolean;
}

export const RATE_LIMIT_RULES = 'authp:rate-limit-rules';

/**
 * Declares limits on a route; the global RateLimitGuard enforces them (one mechanism), in the
 * order given: a rule is counted only if every rule before it let the request through, so declare
 * per-client limits before limits shared by many clients (a client refused by its own limit does
 * not use up the shared one).
 */
export const RateLimit = (...rules: RateLimitRule[]) => SetMetadata(RATE_LIMIT_RULES, rules);

/**
 * Per client address limit of requests that prove a password outside sign-in (password change,
 * step-up, MFA changes, dashboard re-authentication): each costs an argon2 verify, and the failed
 * sign-in throttle takes a right password's attempt back, so without it one signed-in address
 * could keep the hashing pool busy without end. The sign-in limit's value, in a bucket of its own.
 */
export const PASSWORD_PROOF_PER_IP: RateLimitRule = {
  bucket: 'password-proof',
  by: 'ip',
  limit: (c) => c.RATE_LIMIT_LOGIN_PER_IP_PER_MIN,
  windowSeconds: 60,
};
