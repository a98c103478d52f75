import { createCipheriv, createDecipheriv, createHmac, randomBytes } from 'crypto';
import { Inject, Injectable } from '@nestjs/common';
import { APP_CONFIG, AppConfig } from '../../config/config';

/**
 * Envelope encryption with AES-256-GCM: each value gets its own data key, wrapped by the
 * key-encryption key (KEY_ENCRYPTION_KEY). Format: `v1.<iv>.<wrapped dek>.<iv>.<ciphertext>`
 * (base64url parts; GCM tags appended to each ciphertext).
 */
@Injectable()
export class EnvelopeCipher {
  private readonly kek: Buffer;
  constructor(@Inject(APP_CONFIG) config: AppConfig) {
    this.kek = config.keyEncryptionKey;
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
    const dek = open(this.kek, b(iv1), b(wrapped), 'dek');
    return open(dek, b(iv2), b(ct), aad);
  }

  decryptString(envelope: string, aad = ''): string {
    return this.decrypt(envelope, aad).toString('utf8');
  }

  /** A sub-key for a named purpose (HMAC keys for cursors, lookups), derived from the KEK. */
  deriveKey(purpose: string): Buffer {
    return createHmac('sha256', this.kek).update(`authp:${purpose}`).digest();
  }
}

const b = (s: string) => Buffer.from(s, 'base64url');

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
