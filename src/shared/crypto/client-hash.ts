import { createHmac, hkdfSync } from 'crypto';
import { Inject, Injectable } from '@nestjs/common';
import { APP_CONFIG, AppConfig } from '../../config/config';

/** HKDF `info` of the key of IP and user-agent hash prefixes; no other key is derived with it. */
export const CLIENT_HASH_INFO = 'authp:client-hash-prefix:v1';

/**
 * A 32-byte key for one purpose (`info`, never shared between purposes), derived from
 * KEY_ENCRYPTION_KEY: HKDF-SHA256 (RFC 5869), empty salt (the KEK is already uniformly random).
 * Deterministic, so every process and restart with the same KEK derives the same key.
 */
export function deriveKey(kek: Buffer, info: string): Buffer {
  return Buffer.from(hkdfSync('sha256', kek, Buffer.alloc(0), info, 32));
}

/**
 * The HMAC key of client hash prefixes: the same in every process, so audit rows stay correlatable.
 * From the current KEY_ENCRYPTION_KEY only (not KEY_ENCRYPTION_KEY_PREVIOUS): after a KEK rotation,
 * prefixes of new audit rows no longer match earlier ones, and rate-limit counters and the failed
 * sign-in throttle's known addresses, named after these hashes, start afresh.
 */
export function clientHashKey(kek: Buffer): Buffer {
  return deriveKey(kek, CLIENT_HASH_INFO);
}

/**
 * How a client's IP address or user agent (and the address of a mail request without an account)
 * appears in audit metadata, the agent activity timeline
 * (spec 2.10 ip_hash_prefix, user_agent_hash_prefix) and throttling keys: 12 hex characters of
 * HMAC-SHA256 under a server secret. A plain SHA-256 of an IPv4 address (2^32 values) is reversed
 * by enumeration; without the key a prefix reveals nothing, with it equal inputs still match.
 */
@Injectable()
export class ClientHasher {
  private readonly key: Buffer;

  constructor(@Inject(APP_CONFIG) config: AppConfig) {
    this.key = clientHashKey(config.keyEncryptionKey);
  }

  /** 12 hex characters of HMAC-SHA256(key, value). */
  prefix(value: string): string {
    return this.hmac(value).slice(0, 12);
  }

  /**
   * The subject of a Redis key named after an email address (throttling and mail counters): 32 hex
   * characters of the same HMAC. A plain SHA-256 would let anyone who reads Redis (a replica, a
   * backup, a shared instance) confirm an address from a list; `value` carries its purpose first
   * (`user:<tenant>:<email>`, `dashboard:<email>`), so counters of different purposes never meet.
   */
  subject(value: string): string {
    return this.hmac(value).slice(0, 32);
  }

  private hmac(value: string): string {
    return createHmac('sha256', this.key).update(value, 'utf8').digest('hex');
  }

  /** The prefix of an optional value: null when it is absent or empty. */
  optional(value: string | null | undefined): string | null {
    return value ? this.prefix(value) : null;
  }
}
