import { authenticator } from 'otplib';
import * as speakeasy from 'speakeasy';
import { base32NoPadding, generateTotpSecret, matchTotpStep, otpauthUrl, totpStep } from './totp';

describe('TOTP (RFC 6238 with speakeasy)', () => {
  it('base32-encodes per RFC 4648 section 10, without padding', () => {
    const vectors: [string, string][] = [
      ['', ''],
      ['f', 'MY'],
      ['fo', 'MZXQ'],
      ['foo', 'MZXW6'],
      ['foob', 'MZXW6YQ'],
      ['fooba', 'MZXW6YTB'],
      ['foobar', 'MZXW6YTBOI'],
    ];
    for (const [input, want] of vectors) expect(base32NoPadding(Buffer.from(input))).toBe(want);
  });

  it('generates 20-byte seeds: 32 base32 characters, no padding, each different', () => {
    const a = generateTotpSecret();
    expect(a).toMatch(/^[A-Z2-7]{32}$/);
    expect(generateTotpSecret()).not.toBe(a);
  });

  it('builds the otpauth Key URI with the tenant as issuer, percent-encoded, no padding in the secret', () => {
    const secret = generateTotpSecret();
    const url = otpauthUrl('Acme & Co: EU', 'bob+mfa@example.com', secret);
    // a colon in the issuer would split the label there (Key URI format): it becomes a space, in
    // the label and in the issuer parameter alike
    expect(url).toBe(
      `otpauth://totp/Acme%20%26%20Co%20EU:bob%2Bmfa%40example.com?secret=${secret}&issuer=Acme%20%26%20Co%20EU&algorithm=SHA1&digits=6&period=30`,
    );
    const parsed = new URL(url);
    expect(parsed.searchParams.get('secret')).not.toContain('=');
    expect(parsed.searchParams.get('issuer')).toBe('Acme & Co EU');
    const label = decodeURIComponent(parsed.pathname.replace(/^\//, '')); // otpauth://totp/<label>: host totp
    expect(label.split(':')).toEqual(['Acme & Co EU', 'bob+mfa@example.com']);
  });

  it('accepts codes of any RFC 6238 implementation (otplib) and names their time step', () => {
    const secret = generateTotpSecret();
    const now = Date.now();
    const step = totpStep(now);
    const at = (s: number) => authenticator.clone({ epoch: s * 30_000 + 1_000 }).generate(secret);
    expect(matchTotpStep(secret, at(step), now)).toBe(step);
    expect(matchTotpStep(secret, at(step - 1), now)).toBe(step - 1);
    expect(matchTotpStep(secret, at(step + 1), now)).toBe(step + 1);
  });

  it('refuses codes outside a window of one step each side', () => {
    const secret = generateTotpSecret();
    const now = Date.now();
    const step = totpStep(now);
    const at = (s: number) => speakeasy.totp({ secret, encoding: 'base32', counter: s });
    for (const s of [step - 2, step + 2, step - 10]) {
      const code = at(s);
      // a code of a far step may collide with one in the window (1 in 10^6): skip that case
      if ([step - 1, step, step + 1].some((w) => at(w) === code)) continue;
      expect(matchTotpStep(secret, code, now)).toBeNull();
    }
  });

  it('compares exactly six digits (no parseInt leniency)', () => {
    const secret = generateTotpSecret();
    const now = Date.now();
    const code = speakeasy.totp({ secret, encoding: 'base32', counter: totpStep(now) });
    expect(matchTotpStep(secret, `${code}0`, now)).toBeNull();
    expect(matchTotpStep(secret, `${code.slice(0, 5)}x`, now)).toBeNull();
    expect(matchTotpStep(secret, ` ${code}`, now)).toBeNull();
    expect(matchTotpStep(secret, String(Number(code)), now)).toBe(code.startsWith('0') ? null : totpStep(now));
  });
});
