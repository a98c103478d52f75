import { randomBytes } from 'crypto';
import type { AppConfig } from '../../config/config';
import { EnvelopeCipher, kekFingerprint } from './envelope-cipher';

const A = randomBytes(32);
const B = randomBytes(32);
const C = randomBytes(32);
const cipher = (current: Buffer, ...previous: Buffer[]) => new EnvelopeCipher({ keyEncryptionKey: current, previousKeyEncryptionKeys: previous } as unknown as AppConfig);
const parts = (envelope: string) => envelope.split('.');

describe('EnvelopeCipher', () => {
  it('round-trips under the current key, bound to its AAD', () => {
    const c = cipher(A);
    const env = c.encrypt('secret value', 'aad:1');
    expect(env).toMatch(/^v1\.[\w-]+\.[\w-]+\.[\w-]+\.[\w-]+$/);
    expect(c.decryptString(env, 'aad:1')).toBe('secret value');
    expect(() => c.decrypt(env, 'aad:2')).toThrow();
    expect(() => c.decrypt('v2.a.b.c.d')).toThrow('unknown envelope format');
  });

  it('a key that did not wrap the data key fails, with a message that carries no secret', () => {
    const env = cipher(A).encrypt('secret value');
    let message = '';
    try {
      cipher(B).decrypt(env);
    } catch (e) {
      message = (e as Error).message;
    }
    expect(message).toBe('the data key does not open under KEY_ENCRYPTION_KEY');
    expect(() => cipher(B, C).decrypt(env)).toThrow('the data key opens under none of the configured key-encryption keys (KEY_ENCRYPTION_KEY, KEY_ENCRYPTION_KEY_PREVIOUS)');
    for (const secret of [A, B, C]) for (const form of ['base64', 'hex', 'base64url'] as const) expect(message).not.toContain(secret.toString(form));
    expect(() => cipher(B, C).rewrap(env)).toThrow(/none of the configured/);
  });

  it('decrypts under any previous key, in any position; encrypts under the current key only', () => {
    const underA = cipher(A).encrypt('from A', 'x');
    const underC = cipher(C).encrypt('from C', 'x');
    const rotated = cipher(B, C, A);
    expect(rotated.decryptString(underA, 'x')).toBe('from A');
    expect(rotated.decryptString(underC, 'x')).toBe('from C');
    expect(() => rotated.decrypt(underA, 'y')).toThrow(); // the AAD still binds
    const fresh = rotated.encrypt('new', 'x');
    expect(cipher(B).decryptString(fresh, 'x')).toBe('new');
    expect(() => cipher(A).decrypt(fresh, 'x')).toThrow();
  });

  it('rewrap: the data key re-wrapped under the current key, the ciphertext unchanged; null when already current', () => {
    const underA = cipher(A).encrypt('payload', 'aad');
    const rotated = cipher(B, A);
    const rewrapped = rotated.rewrap(underA)!;
    expect(rewrapped).not.toBeNull();
    expect(parts(rewrapped)[0]).toBe('v1');
    expect(parts(rewrapped).slice(3)).toEqual(parts(underA).slice(3)); // iv and ciphertext (with tag) as they were
    expect(parts(rewrapped).slice(1, 3)).not.toEqual(parts(underA).slice(1, 3));
    // B alone opens it now, A alone no longer does
    expect(cipher(B).decryptString(rewrapped, 'aad')).toBe('payload');
    expect(() => cipher(A).decrypt(rewrapped, 'aad')).toThrow();
    // idempotent
    expect(rotated.rewrap(rewrapped)).toBeNull();
    expect(cipher(B).rewrap(rotated.encrypt('x'))).toBeNull();
    expect(() => rotated.rewrap('not an envelope')).toThrow('unknown envelope format');
  });

  it('fingerprints: 16 hex characters, stable, distinct per key, never the key; keyIds list current then previous', () => {
    expect(kekFingerprint(A)).toMatch(/^[0-9a-f]{16}$/);
    expect(kekFingerprint(A)).toBe(kekFingerprint(Buffer.from(A)));
    expect(kekFingerprint(A)).not.toBe(kekFingerprint(B));
    expect(A.toString('hex')).not.toContain(kekFingerprint(A));
    const c = cipher(B, A, C);
    expect(c.keyId).toBe(kekFingerprint(B));
    expect(c.keyIds).toEqual([kekFingerprint(B), kekFingerprint(A), kekFingerprint(C)]);
    // not a key derived for another purpose either
    expect(c.deriveKey('cursor').toString('hex')).not.toContain(c.keyId);
  });

  it('deriveKeys: the current key first (deriveKey), then each previous one', () => {
    const rotated = cipher(B, A);
    const keys = rotated.deriveKeys('email-otp');
    expect(keys).toHaveLength(2);
    expect(keys[0]).toEqual(rotated.deriveKey('email-otp'));
    expect(keys[0]).toEqual(cipher(B).deriveKey('email-otp'));
    expect(keys[1]).toEqual(cipher(A).deriveKey('email-otp'));
    expect(cipher(A).deriveKeys('email-otp')).toEqual([cipher(A).deriveKey('email-otp')]);
    expect(rotated.deriveKey('cursor')).not.toEqual(keys[0]);
  });

  it('a config without previous keys (older callers) works as before', () => {
    const c = new EnvelopeCipher({ keyEncryptionKey: A } as unknown as AppConfig);
    expect(c.decryptString(c.encrypt('v'))).toBe('v');
    expect(c.keyIds).toEqual([kekFingerprint(A)]);
  });
});
