import { isEmailAddress } from './email-address';

describe('isEmailAddress', () => {
  it.each(['ada@example.com', 'Ada.Lovelace+tag@Example.COM', 'kim@busineß.com', 'kim@business.com', 'jürgen@MÜNCHEN.de', 'x@βας.gr', 'x@βασ.gr', 'x@ΒΑΣ.gr', 'x@mail.βας', 'x@xn--mnchen-3ya.de'])('accepts %s', (a) => {
    expect(isEmailAddress(a)).toBe(true);
  });

  it.each([
    // the key would name business.com, the mail would go to busineß.com
    'kim@busineẞ.com',
    'kim@BUSINEẞ.COM',
    // IDNA maps a capital Σ ending the name to σ, lower-casing to ς: two names
    'x@mail.ΒΑΣ',
    // a quoted local part: the envelope would become x@evil.com@example.com
    '"x@evil.com"@example.com',
    '"a.b"@example.com',
    'not an address',
    'a\uff20b@example.com',
  ])('refuses %s', (a) => {
    expect(isEmailAddress(a)).toBe(false);
  });
});
