import { createHash, createHmac, hkdfSync } from 'crypto';

/**
 * The ip_hash_prefix / user_agent_hash_prefix the service must record for `value`, computed
 * independently of src/: HMAC-SHA256 under HKDF-SHA256(KEY_ENCRYPTION_KEY of the test
 * environment, empty salt, info "authp:client-hash-prefix:v1"), 12 hex characters.
 */
export function expectedClientHash(value: string): string {
  return clientHmac(value).slice(0, 12);
}

/** The subject of a Redis key named after an email address: 32 hex characters of the same HMAC. */
export function expectedKeySubject(value: string): string {
  return clientHmac(value).slice(0, 32);
}

function clientHmac(value: string): string {
  const kek = Buffer.from(process.env.KEY_ENCRYPTION_KEY ?? '', 'base64');
  const key = Buffer.from(hkdfSync('sha256', kek, Buffer.alloc(0), 'authp:client-hash-prefix:v1', 32));
  return createHmac('sha256', key).update(value).digest('hex');
}

/** The unsalted SHA-256 prefix a keyed prefix must never equal (it is reversible for an IPv4). */
export function plainSha256Prefix(value: string): string {
  return createHash('sha256').update(value).digest('hex').slice(0, 12);
}
