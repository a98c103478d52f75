import { normalizeEmail } from './email';

describe('normalizeEmail (the comparison key of an email address)', () => {
  it('trims and lower-cases ASCII', () => {
    expect(normalizeEmail('  John.Doe@Example.COM \n')).toBe('john.doe@example.com');
  });

  it('canonical forms: NFC and NFD are one key', () => {
    expect(normalizeEmail('Jos\u00e9@example.com')).toBe(normalizeEmail('jose\u0301@example.com'));
    expect(normalizeEmail('jose\u0301@example.com')).toBe('jos\u00e9@example.com');
  });

  it('compatibility forms fold (NFKC): fullwidth, ligatures', () => {
    expect(normalizeEmail('\uff4a\uff4f\uff48\uff4e@example.com')).toBe('john@example.com'); // ｊｏｈｎ
    expect(normalizeEmail('\uff2a\uff2f\uff28\uff2e@\uff45xample.com')).toBe('john@example.com'); // ＪＯＨＮ@ｅxample.com
    expect(normalizeEmail('\ufb01le@example.com')).toBe('file@example.com'); // ﬁle
  });

  it('final sigma: every case variant of σασ is one key', () => {
    const key = normalizeEmail('\u03c3\u03b1\u03c3@example.com'); // σασ
    expect(key).toBe('\u03c3\u03b1\u03c3@example.com');
    expect(normalizeEmail('\u03a3\u0391\u03a3@example.com')).toBe(key); // ΣΑΣ (toLowerCase gives σας)
    expect(normalizeEmail('\u03c3\u03b1\u03c2@example.com')).toBe(key); // σας
    expect(normalizeEmail('\u03a3\u03b1\u03c2@example.com')).toBe(key); // Σας
  });

  it('ß stays ß: not full case folding, straße and strasse are two addresses', () => {
    expect(normalizeEmail('STRA\u00dfE@example.com')).toBe('stra\u00dfe@example.com');
    expect(normalizeEmail('stra\u00dfe@example.com')).not.toBe(normalizeEmail('strasse@example.com'));
  });

  it('an internationalized domain is one domain in its A-label and U-label spellings (IDNA)', () => {
    expect(normalizeEmail('x@xn--mnchen-3ya.de')).toBe('x@m\u00fcnchen.de');
    expect(normalizeEmail('X@M\u00dcNCHEN.de')).toBe('x@m\u00fcnchen.de');
    expect(normalizeEmail('dup@XN--BCHER-KVA.de')).toBe(normalizeEmail('dup@b\u00fccher.de'));
    // ASCII domains and names IDNA refuses stay as they are
    expect(normalizeEmail('a@exa_mple.com')).toBe('a@exa_mple.com');
    expect(normalizeEmail('a@xn--zz.com')).toBe('a@xn--zz.com');
    // the local part is not a domain
    expect(normalizeEmail('xn--mnchen-3ya@example.com')).toBe('xn--mnchen-3ya@example.com');
  });

  it("a domain's case is DNS's (UTS 46): βας.gr and βασ.gr are two domains, ΒΑΣ.gr is βασ.gr; the local part folds ς as before", () => {
    expect(normalizeEmail('u@xn--mxab3c.gr')).toBe('u@\u03b2\u03b1\u03c2.gr'); // βας.gr
    expect(normalizeEmail('u@\u03b2\u03b1\u03c2.gr')).toBe('u@\u03b2\u03b1\u03c2.gr');
    expect(normalizeEmail('u@\u03b2\u03b1\u03c2.gr')).not.toBe(normalizeEmail('u@\u03b2\u03b1\u03c3.gr'));
    expect(normalizeEmail('u@\u0392\u0391\u03a3.gr')).toBe('u@\u03b2\u03b1\u03c3.gr');
    expect(normalizeEmail('\u03a3\u0391\u03a3@\u03b2\u03b1\u03c2.gr')).toBe('\u03c3\u03b1\u03c3@\u03b2\u03b1\u03c2.gr');
  });

  it('is a fixed point, also where NFKC makes a leading space (¨ is U+0020 U+0308)', () => {
    for (const e of ['u@xn--mxab3c.gr', 'u@\u0392\u0391\u03a3.gr', 'x@xn--mnchen-3ya.de', 'x@STRA\u00dfE.de', 'a@xn--zz.com', '\u00a8a@example.com', ' \u00b4b@example.com', '\u03a3@example.com', '\u1e9e@example.com', '\u212a@example.com', 'I\u0307@example.com']) {
      expect(normalizeEmail(normalizeEmail(e))).toBe(normalizeEmail(e));
    }
  });
});
