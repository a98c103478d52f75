import { createHmac, randomInt } from 'crypto';

/** How many recovery codes verify-setup and regenerate hand out (issue 5 item 5). */
export const RECOVERY_CODE_COUNT = 10;
/** 32 symbols without look-alikes (no l, o, 0, 1): 5 bits each, 10 symbols = 50 bits per code */
const ALPHABET = 'abcdefghijkmnpqrstuvwxyz23456789';
const LENGTH = 10;
const NORMALIZED = new RegExp(`^[${ALPHABET}]{${LENGTH}}$`);

/** `xxxxx-xxxxx` codes from the CSPRNG (unbiased: crypto.randomInt). */
export function generateRecoveryCodes(count = RECOVERY_CODE_COUNT): string[] {
  const codes = new Set<string>();
  while (codes.size < count) {
    let c = '';
    for (let i = 0; i < LENGTH; i++) c += ALPHABET[randomInt(ALPHABET.length)];
    codes.add(`${c.slice(0, 5)}-${c.slice(5)}`);
  }
  return [...codes];
}

/** What the user typed, as stored: case, spaces and hyphens ignored; null when it cannot be a code. */
export function normalizeRecoveryCode(input: string): string | null {
  const n = input.toLowerCase().replace(/[\s-]/g, '');
  return NORMALIZED.test(n) ? n : null;
}

/**
 * Stored form of a code: HMAC-SHA256 under a key derived from KEY_ENCRYPTION_KEY, bound to the
 * user. A database dump alone does not allow an offline search of the 50-bit space.
 */
export function hashRecoveryCode(key: Buffer, userId: string, normalized: string): string {
  return createHmac('sha256', key).update(`${userId}:${normalized}`).digest('hex');
}
