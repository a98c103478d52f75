import { createCipheriv, createDecipheriv, createHmac, hkdfSync, randomBytes } from 'crypto';
import { Inject, Injectable } from '@nestjs/common';
import { APP_CONFIG, AppConfig } from '../../config/config';

/** HKDF `info` of key fingerprints (kekFingerprint); no other key is derived with it. */
const FINGERPRINT_INFO = 'authp:kek-fingerprint:v1';

/**
 * A short public name of a key-encryption key for reports and the `key_id` of recovery codes:
 * 16 hex characters (8 bytes) of HKDF-SHA256 of the key under a fixed info. One-way: it names the
 * key, it never reveals it (nor any key derived from it for another purpose).
 */
export function kekFingerprint(kek: Buffer): string {
  return Buffer.from(hkdfSync('sha256', kek, Buffer.alloc(0), FINGERPRINT_INFO, 8)).toString('hex');
}

/**
 * Envelope encryption with AES-256-GCM: each value gets its own data key, wrapped by the
 * key-encryption key (KEY_ENCRYPTION_KEY). Format: `v1.<iv>.<wrapped dek>.<iv>.<ciphertext>`
 * (base64url parts; GCM tags appended to each ciphertext).
 *
 * Rotation: values are always encrypted under the current KEY_ENCRYPTION_KEY; decryption tries it
 * first, then each key of KEY_ENCRYPTION_KEY_PREVIOUS in order (a data key whose GCM tag does not
 * verify under a key was not wrapped by it). `rewrap` moves an envelope's data key to the current
 * key without touching its ciphertext (the CLI's `kek:rewrap`).
 */
@Injectable()
export class EnvelopeCipher {
  private readonly kek: Buffer;
  /** the current key first, then the previous ones */
  private readonly keks: readonly Buffer[];
  /** kekFingerprint of the current key */
  readonly keyId: string;
  /** kekFingerprint of every configured key, the current one first (as `keks`) */
  readonly keyIds: readonly string[];

  constructor(@Inject(APP_CONFIG) config: AppConfig) {
    this.kek = config.keyEncryptionKey;
    this.keks = [this.kek, ...(config.previousKeyEncryptionKeys ?? [])];
    this.keyIds = this.keks.map(kekFingerprint);
    this.keyId = this.keyIds[0];
  }

  encrypt(plaintext: string | Buffer, aad = ''): string {
    const dek = randomBytes(32);
    const [iv1, wrapped] = seal(this.kek, dek, 'dek');
    const [iv2, ct] = seal(dek, Buffer.isBuffer(plaintext) ? plaintext : Buffer.from(plaintext, 'utf8'), aad);
    return ['v1', iv1, wrapped, iv2, ct].map((p) => (typeof p === 'string' ? p : p.toString('base64url'))).join('.');
  }

  decrypt(envelope: string, aad = ''): Buffer {
    const [v, iv1, wrapped, iv2, ct] = envelope.split('.');
    if (v !== 'v1' || !ct) throw new Error('unknown envelope format');
    const dek = this.unwrap(iv1, wrapped)[0];
    return open(dek, b(iv2), b(ct), aad);
  }

  decryptString(envelope: string, aad = ''): string {
    return this.decrypt(envelope, aad).toString('utf8');
  }

  /**
   * The envelope with its data key wrapped again under the current key (its ciphertext, and so
   * its AAD binding, unchanged; the plaintext is never opened), or null when the current key
   * wraps it already. Throws when no configured key opens its data key.
   */
  rewrap(envelope: string): string | null {
    const parts = envelope.split('.');
    const [v, iv1, wrapped, , ct] = parts;
    if (v !== 'v1' || !ct) throw new Error('unknown envelope format');
    const [dek, index] = this.unwrap(iv1, wrapped);
    try {
      if (index === 0) return null;
      const [iv, rewrapped] = seal(this.kek, dek, 'dek');
      return ['v1', iv.toString('base64url'), rewrapped.toString('base64url'), ...parts.slice(3)].join('.');
    } finally {
      dek.fill(0);
    }
  }

  /** A sub-key for a named purpose (HMAC keys for cursors, lookups), derived from the current KEK. */
  deriveKey(purpose: string): Buffer {
    return deriveFrom(this.kek, purpose);
  }

  /**
   * The sub-key of `purpose` under every configured key, the current one first: what verifies a
   * value keyed before a rotation (email codes, recovery codes, cursors). New values are keyed
   * with the first (deriveKey) only.
   */
  deriveKeys(purpose: string): Buffer[] {
    return this.keks.map((k) => deriveFrom(k, purpose));
  }

  /** The data key and the index in `keks` of the key that wrapped it: the current key is tried first. */
  private unwrap(iv1: string, wrapped: string): [Buffer, number] {
    const iv = b(iv1);
    const data = b(wrapped);
    for (let i = 0; i < this.keks.length; i++) {
      try {
        return [open(this.keks[i], iv, data, 'dek'), i];
      } catch {
        // GCM authentication failed: not wrapped under this key
      }
    }
    throw new Error(
      this.keks.length > 1
        ? 'the data key opens under none of the configured key-encryption keys (KEY_ENCRYPTION_KEY, KEY_ENCRYPTION_KEY_PREVIOUS)'
        : 'the data key does not open under KEY_ENCRYPTION_KEY',
    );
  }
}

const b = (s: string) => Buffer.from(s, 'base64url');

function deriveFrom(kek: Buffer, purpose: string): Buffer {
  return createHmac('sha256', kek).update(`authp:${purpose}`).digest();
}

function seal(key: Buffer, data: Buffer, aad: string): [Buffer, Buffer] {
  const iv = randomBytes(12);
  const c = createCipheriv('aes-256-gcm', key, iv);
  c.setAAD(Buffer.from(aad));
  const out = Buffer.concat([c.update(data), c.final(), c.getAuthTag()]);
  return [iv, out];
}

function open(key: Buffer, iv: Buffer, data: Buffer, aad: string): Buffer {
  const d = createDecipheriv('aes-256-gcm', key, iv);
  d.setAAD(Buffer.from(aad));
  d.setAuthTag(data.subarray(data.length - 16));
  return Buffer.concat([d.update(data.subarray(0, data.length - 16)), d.final()]);
}
