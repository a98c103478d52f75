import { isEmailAddress } from './email-address';

describe('isEmailAddress', () => {
  it.each(['ada@example.com', 'Ada.Lovelace+tag@Example.COM', 'kim@busineß.com', 'kim@business.com', 'jürgen@MÜNCHEN.de', 'x@βας.gr', 'x@βασ.gr', 'x@ΒΑΣ.gr', 'x@mail.βας', 'x@xn--mnchen-3ya.de', 'می\u200cخواهم@example.com', 'ශ්\u200dරී@example.com', 'क्\u200dष@example.com', 'x@می\u200cخواهم.example', 'র\u200d\u09cdযাব@example.com', 'र\u200d\u094dय@example.com'])('accepts %s', (a) => {
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
    // a joiner where it changes nothing on screen (IDNA CONTEXTJ refuses it there), default-ignorable and unassigned code points
    'ко\u200dт@example.com',
    'josé\u200cé@example.com',
    '中\u200d文@example.com',
    '\u200cمی@example.com',
    'ev\u200dil@example.com',
    'adm\u2065in@example.com',
    'a\u0378b@example.com',
    'a\u034fb@example.com',
    // a ZWNJ after an Arabic letter that never joins to the left (platform IDNA lets these through)
    'کو\u200cچه@example.com',
    'بهروز\u200cجان@example.com',
    'بد\u200cنام@example.com',
    'ب\u0870\u200cب@example.com',
    'ب\u088e\u200cب@example.com',
    'ܒܐ\u200cܒ@example.com',
    // before one that never joins to the right
    'می\u200cء@example.com',
    'ب\u200c\u08adب@example.com',
    // a ZWJ before a virama after another letter than ra
    'ক\u200d\u09cdয@example.com',
  ])('refuses %s', (a) => {
    expect(isEmailAddress(a)).toBe(false);
  });
});
