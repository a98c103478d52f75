/**
 * LoginThrottleService realm of failed second-factor attempts (wrong TOTP or recovery codes,
 * wrong passwords on MFA disable/regenerate), counted per user id and client address.
 */
export const mfaThrottleRealm = (tenantId: string) => `mfa:${tenantId}`;
