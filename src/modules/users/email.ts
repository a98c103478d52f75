import { domainToASCII, domainToUnicode } from 'url';

/**
 * The comparison key of an email address (unique per tenant for end users, over the platform for
 * dashboard accounts; every lookup by email uses it). The address itself is stored as typed but in
 * NFKC (mailboxSpelling); only
 * this key is compared. Steps:
 *  1. trim, then Unicode NFKC: canonical forms fold (josé typed with a precomposed é or with
 *     e + combining accent) and so do compatibility forms (fullwidth `ｊｏｈｎ`, the ligature `ﬁ`,
 *     superscripts), which would otherwise make look-alike accounts. NFKC, not NFC: PRECIS folds
 *     width (RFC 8265) and its nickname profile uses NFKC (RFC 8266).
 *  2. trim again: NFKC turns a few spacing marks into a space + combining mark (`¨` is U+0020
 *     U+0308), and the key must be stable when normalized again.
 *  3. toLowerCase.
 *  4. final sigma ς to σ: toLowerCase turns a capital Σ at the end of a word into ς, so `ΣΑΣ`
 *     would give `σας` and miss the account `σασ`; Unicode case folding maps ς to σ. This is not
 *     full case folding: `ß` stays `ß` and is not `ss` (as in simple case folding), so `straße`
 *     and `strasse` are two addresses.
 *  5. NFKC again: a lower-case mapping can leave a sequence that is not normalized.
 * Steps 3-5 apply to the local part. The domain instead takes its IDNA (UTS 46) Unicode form,
 * whose case mapping is DNS's: `xn--mnchen-3ya.de` and `münchen.de` are one DNS name, so one
 * address, while `βας.gr` and `βασ.gr` are two (UTS 46 keeps the final sigma; a capital Σ maps to
 * σ). A domain IDNA refuses is folded as a local part is.
 * The result is a fixed point (normalizeEmail(normalizeEmail(x)) === normalizeEmail(x)).
 * Migrations 1764700000000-email-nfkc and 1765100000000-email-idn hold frozen copies: change
 * both together, with a migration.
 */
export function normalizeEmail(email: string): string {
  const text = email.trim().normalize('NFKC').trim();
  const at = text.lastIndexOf('@');
  return at < 0 ? fold(text) : `${fold(text.slice(0, at))}@${canonicalDomain(text.slice(at + 1))}`;
}

const fold = (s: string): string => s.toLowerCase().replace(/\u03c2/g, '\u03c3').normalize('NFKC');

/** A domain in its IDNA Unicode form (`xn--bcher-kva.de` is `bücher.de`); one IDNA refuses folded as a local part. */
export function canonicalDomain(domain: string): string {
  const d = domain.normalize('NFKC');
  if (/^[A-Za-z0-9.-]*$/.test(d) && !/xn--/i.test(d)) return d.toLowerCase();
  const ascii = domainToASCII(d);
  return ascii ? domainToUnicode(ascii) : fold(d);
}

/**
 * The spelling an address is stored and mailed under: as typed, case kept, but in NFKC. Its key
 * (normalizeEmail) folds compatibility forms, so `ｖｉｃｔｉｍ@example.com` is the account of
 * `victim@example.com`; stored as typed, every mail of that account (verification, reset, links,
 * codes) would go to the fullwidth mailbox, which is another one (RFC 6531) or none, and a squatter
 * could keep the owner's address from the owner, whose reset never arrived. In NFKC every mail of
 * the account reaches the mailbox its key names. isEmailAddress checks that this form is valid.
 */
export function mailboxSpelling(email: string): string {
  return email.trim().normalize('NFKC');
}
