/**
 * The audience of enrollment-only tokens (spec 2.8): TOTP enrollment is the only resource that
 * accepts them. Shared with RFC 7009 revocation, which must recognise them as tokens of ours.
 */
export const enrollmentAudience = (tokenAudience: string): string => `${tokenAudience}/v1/auth/mfa/totp`;
