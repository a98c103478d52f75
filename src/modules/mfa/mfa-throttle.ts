import type { AppConfig } from '../../config/config';
import type { ThrottleLimits } from '../../shared/rate-limit/login-throttle.service';

/**
 * LoginThrottleService realm of failed second-factor attempts (wrong TOTP or recovery codes),
 * counted per user id and client address.
 */
export const mfaThrottleRealm = (tenantId: string) => `mfa:${tenantId}`;

/**
 * The MFA realm's limits: the login throttle's per (account, address) pair and per address, but
 * per account MFA_FAILURES_PER_ACCOUNT (10) rather than the password's 50. Whoever reaches the
 * second factor has the first: a TOTP code (three valid in the ±1 step window) must not be
 * guessable at the password's pace from many addresses (NIST SP 800-63B 5.2.2). Addresses that
 * passed MFA for the account before are not held by the account limit, so the owner still gets in.
 */
export function mfaThrottleLimits(c: AppConfig): ThrottleLimits {
  return {
    perAccountIp: c.LOGIN_FAILURES_PER_ACCOUNT_IP,
    perAccount: c.MFA_FAILURES_PER_ACCOUNT,
    perIp: c.LOGIN_FAILURES_PER_IP,
    windowSeconds: c.LOGIN_FAILURE_WINDOW_SECONDS,
  };
}
