import { randomBytes } from 'crypto';
import * as speakeasy from 'speakeasy';
import { safeEqual } from '../../shared/crypto/tokens';

/** RFC 6238 parameters every authenticator app supports (Google Authenticator ignores others). */
export const TOTP_PERIOD_SECONDS = 30;
export const TOTP_DIGITS = 6;
/** accepted clock drift: at most one step each side (RFC 6238 section 5.2) */
export const TOTP_WINDOW = 1;
/** 160-bit seed, the HMAC-SHA1 block size recommendation of RFC 4226 section 4 */
export const TOTP_SECRET_BYTES = 20;

const BASE32_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';

/**
 * RFC 4648 base32 without `=` padding (the otpauth Key URI format wants none; speakeasy issue
 * 135: its generated secrets and URLs could carry padding some apps reject).
 */
export function base32NoPadding(data: Buffer): string {
  let out = '';
  let bits = 0;
  let value = 0;
  for (const byte of data) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out += BASE32_ALPHABET[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
    value &= (1 << bits) - 1;
  }
  if (bits > 0) out += BASE32_ALPHABET[(value << (5 - bits)) & 31];
  return out;
}

/** A fresh TOTP seed: 20 random bytes, base32 without padding (32 characters). */
export function generateTotpSecret(): string {
  return base32NoPadding(randomBytes(TOTP_SECRET_BYTES));
}

/**
 * The otpauth Key URI (github.com/google/google-authenticator/wiki/Key-Uri-Format): label
 * `<issuer>:<account>`, both percent-encoded, and every parameter spelled out. Neither part may
 * hold a colon, literal or %3A (apps split the label at the first one), so a colon in the issuer
 * (a tenant named "Acme: EU") becomes a space, in the label and in the equal `issuer` parameter.
 */
export function otpauthUrl(issuer: string, account: string, secret: string): string {
  const i = encodeURIComponent(issuer.replace(/\s*:+\s*/g, ' ').trim() || 'Authenticator');
  return (
    `otpauth://totp/${i}:${encodeURIComponent(account)}?secret=${secret}&issuer=${i}` +
    `&algorithm=SHA1&digits=${TOTP_DIGITS}&period=${TOTP_PERIOD_SECONDS}`
  );
}

/** The RFC 6238 time step (counter) of a moment. */
export function totpStep(nowMs: number): number {
  return Math.floor(nowMs / 1000 / TOTP_PERIOD_SECONDS);
}

/**
 * The time step whose code equals `code` within the window around `nowMs`, or null. Exactly six
 * digits are compared as strings in constant time (speakeasy's own verify parses with parseInt,
 * which would accept `12345x` or drop a leading zero). Every step of the window is computed, so
 * the time taken does not depend on which one matched.
 */
export function matchTotpStep(secret: string, code: string, nowMs = Date.now(), window = TOTP_WINDOW): number | null {
  if (!/^\d{6}$/.test(code)) return null;
  const current = totpStep(nowMs);
  let matched: number | null = null;
  for (let step = current - window; step <= current + window; step++) {
    const expected = speakeasy.totp({ secret, encoding: 'base32', algorithm: 'sha1', digits: TOTP_DIGITS, counter: step });
    if (safeEqual(expected, code)) matched = step; // the latest matching step: replay protection stays monotonic
  }
  return matched;
}
