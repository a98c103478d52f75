import { createHash, randomBytes, timingSafeEqual } from 'crypto';

/** 32 random bytes, base64url (256 bits): API keys, refresh secrets, session ids, link tokens. */
export function randomToken(bytes = 32): string {
  return randomBytes(bytes).toString('base64url');
}

/** SHA-256 hex of a secret; secrets are stored only in this form. */
export function sha256Hex(value: string | Buffer): string {
  return createHash('sha256').update(value).digest('hex');
}

/**
 * 12 hex characters of SHA-256: how token ids (`jti`, random UUIDs: 122 random bits, nothing to
 * enumerate) and other high-entropy values appear in audit records. Never for IP addresses or user
 * agents, whose few values a plain hash does not hide: ClientHasher (client-hash.ts) keys those.
 */
export function hashPrefix(value: string): string {
  return sha256Hex(value).slice(0, 12);
}

/** Constant-time comparison of two strings. */
export function safeEqual(a: string, b: string): boolean {
  const ab = Buffer.from(a);
  const bb = Buffer.from(b);
  return ab.length === bb.length && timingSafeEqual(ab, bb);
}
