import { randomBytes } from 'crypto';
import { generateRecoveryCodes, hashRecoveryCode, normalizeRecoveryCode, RECOVERY_CODE_COUNT } from './recovery-codes';

describe('recovery codes', () => {
  it('generates 10 distinct xxxxx-xxxxx codes without look-alike characters', () => {
    const codes = generateRecoveryCodes();
    expect(codes).toHaveLength(RECOVERY_CODE_COUNT);
    expect(new Set(codes).size).toBe(RECOVERY_CODE_COUNT);
    for (const c of codes) expect(c).toMatch(/^[a-km-np-z2-9]{5}-[a-km-np-z2-9]{5}$/);
  });

  it('normalizes case, spaces and hyphens; refuses what cannot be a code', () => {
    const [c] = generateRecoveryCodes(1);
    const n = c.replace('-', '');
    expect(normalizeRecoveryCode(c)).toBe(n);
    expect(normalizeRecoveryCode(` ${c.toUpperCase()} `)).toBe(n);
    expect(normalizeRecoveryCode(`${c.slice(0, 5)} ${c.slice(6)}`)).toBe(n);
    expect(normalizeRecoveryCode('123456')).toBeNull();
    expect(normalizeRecoveryCode('abcde-fghi0')).toBeNull(); // 0 is not in the alphabet
    expect(normalizeRecoveryCode(`${n}a`)).toBeNull();
  });

  it('hashes with a key and binds the hash to the user', () => {
    const key = randomBytes(32);
    const n = normalizeRecoveryCode(generateRecoveryCodes(1)[0])!;
    const h = hashRecoveryCode(key, 'user-a', n);
    expect(h).toMatch(/^[0-9a-f]{64}$/);
    expect(h).not.toContain(n);
    expect(hashRecoveryCode(key, 'user-a', n)).toBe(h);
    expect(hashRecoveryCode(key, 'user-b', n)).not.toBe(h);
    expect(hashRecoveryCode(randomBytes(32), 'user-a', n)).not.toBe(h);
  });
});
