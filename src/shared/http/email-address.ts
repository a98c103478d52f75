import { domainToASCII, domainToUnicode } from 'url';
import { isEmail, ValidateBy, ValidationOptions } from 'class-validator';

// characters nobody sees: controls, format characters (zero-width space and joiners, soft hyphen,
// word joiner, byte-order mark, bidirectional marks), every default-ignorable code point (the
// combining grapheme joiner, variation selectors, fillers; renderers draw them as nothing), the
// Hangul and Braille blanks, and unassigned code points (U+2065 is both; a font has no glyph for
// an unassigned one, and a later Unicode may make it anything)
const INVISIBLE = /[\p{Cc}\p{Cf}\p{Cn}\p{Default_Ignorable_Code_Point}\p{Variation_Selector}\u115F\u1160\u2800\u3164\uFFA0]|\u17B4|\u17B5/u;

// a run of non-ASCII letters and marks with the zero-width joiners in it (the context IDNA's
// CONTEXTJ rules look at: the character before a joiner, the joining letters around it)
const JOINED_RUN = /(?:(?=\P{ASCII})[\p{L}\p{M}\u200C\u200D])+/gu;

/**
 * Letters of the joining scripts that join only to the right (Joining_Type R, Unicode
 * DerivedJoiningType.txt, checked against the idna package's table) or to neither side (U): a
 * ZWNJ after one changes nothing on screen (it never joined to the left). Arabic (its blocks and
 * Arabic Extended-B), Syriac (and its supplement), Mandaic; N'Ko and Adlam the platform's IDNA
 * refuses outright, Mongolian letters join both ways.
 */
const NOT_LEFT_JOINING = new RegExp(
  '[\\u0621-\\u0625\\u0627\\u0629\\u062F-\\u0632\\u0648\\u0671-\\u0677\\u0688-\\u0699\\u06C0\\u06C3-\\u06CB\\u06CD\\u06CF\\u06D2\\u06D3\\u06D5\\u06DD\\u06E5\\u06E6\\u06EE\\u06EF' +
    '\\u0710\\u0715-\\u0719\\u071E\\u0728\\u072A\\u072C\\u072F\\u074D\\u0840\\u0846\\u0847\\u0849\\u0854\\u0856-\\u0858\\u0867\\u0869\\u086A' +
    '\\u0759-\\u075B\\u076B\\u076C\\u0771\\u0773\\u0774\\u0778\\u0779\\u0870-\\u0882\\u0887\\u088E\\u08AA-\\u08AD\\u08AE\\u08B1\\u08B2\\u08B9\\u08C9\\u{10EC2}]',
  'u',
);
/** Joining_Type U letters of those scripts: a ZWNJ before one changes nothing either. */
const NOT_RIGHT_JOINING = /[\u0621\u0674\u06DD\u06E5\u06E6\u0887\u08AD\u08C9]/u;

/**
 * The text with the zero-width joiners that are part of the spelling taken out: those IDNA allows
 * in a domain label (RFC 5892 CONTEXTJ: after a virama, as in Sinhala `ශ්‍රී`, or a ZWNJ between
 * joining letters, as in Persian `می‌خواهم`), checked by the platform's IDNA (its CheckJoiners),
 * and, where that is laxer than RFC 5892, here: a ZWNJ after an Arabic letter that never joins to
 * the left (`و ز ر د ا`), or before one that never joins to the right, is not. Also Bengali and
 * Devanagari ra + ZWJ + virama (the Unicode Standard's ya-phala and eyelash-ra spelling, which
 * IDNA has no rule for). Elsewhere (between two Cyrillic, Latin or Han letters) a joiner changes
 * nothing on screen, so it stays, and INVISIBLE refuses it: `ко‍т` would be a second account that
 * reads as `кот`.
 */
function withoutSpellingJoiners(value: string): string {
  return value.replace(JOINED_RUN, (run) => {
    if (!/[\u200C\u200D]/.test(run)) return run;
    const chars = [...run];
    const base = (from: number, step: 1 | -1) => {
      for (let i = from; i >= 0 && i < chars.length; i += step) if (!/\p{M}/u.test(chars[i])) return chars[i];
      return undefined;
    };
    const spelled = chars.map((c, i) => {
      if (c === '\u200D' && /[\u09B0\u0930]/.test(chars[i - 1] ?? '') && /[\u09CD\u094D]/.test(chars[i + 1] ?? '')) return 'ra-zwj';
      if (c === '\u200C') {
        const before = base(i - 1, -1);
        const after = base(i + 1, 1);
        if ((before && NOT_LEFT_JOINING.test(before)) || (after && NOT_RIGHT_JOINING.test(after))) return 'invisible';
      }
      return undefined;
    });
    if (spelled.includes('invisible')) return run;
    // the ra + ZWJ + virama spellings left out of IDNA's check, which refuses them
    const checked = chars.filter((_, i) => spelled[i] !== 'ra-zwj').join('');
    return !/[\u200C\u200D]/.test(checked) || domainToASCII(checked) ? run.replace(/[\u200C\u200D]/g, '') : run;
  });
}

/**
 * Whether the address is one mail can really be sent to and that reads as what it is: a valid
 * address (class-validator's isEmail) with no invisible character, whose domain is stable under
 * IDNA (UTS 46): a domain that IDNA would change on the way to DNS (a soft hyphen or a zero-width
 * space dropped) could reach another domain than the one the tenant's block lists compared.
 */
export function isEmailAddress(value: unknown): boolean {
  // blanks (an ideographic or en space) pass isEmail's UTF-8 local part
  if (typeof value !== 'string' || !isEmail(value) || /[\s\p{Z}]/u.test(value) || INVISIBLE.test(withoutSpellingJoiners(value))) return false;
  // a quoted local part is read differently by mail software: nodemailer sends `"x@evil.com"@a.com`
  // to the envelope address x@evil.com@a.com, past a tenant's allowlist of a.com; dot-atoms only
  if (value.includes('"')) return false;
  const domain = value.slice(value.lastIndexOf('@') + 1).normalize('NFKC');
  if (!idnaStable(domain.toLowerCase()) || !caseStable(domain)) return false;
  // the address is stored and mailed in NFKC (mailboxSpelling): that form must be an address too
  // (a fullwidth `＠` in the local part would make a second @) and fit the 254 characters
  const nfkc = value.normalize('NFKC');
  return nfkc === value || (nfkc.length <= MAX_EMAIL_LENGTH && isEmailAddress(nfkc));
}

/** RFC 5321's path limit, as every email field has it. */
const MAX_EMAIL_LENGTH = 254;

/**
 * Whether the domain reaches the same DNS name in any case. The account key takes the domain's
 * IDNA form as typed (normalizeEmail), mail software lower-cases it first (nodemailer), and UTS 46
 * maps the capital ẞ (U+1E9E) to `ss` but keeps the small ß: `kim@busineẞ.com` has the key of
 * kim@business.com while its mail goes to busineß.com, another domain, whose owner would hold the
 * account of the business.com mailbox, verified, and pass a tenant's allowlist of business.com.
 * Likewise a capital Σ ending the name: IDNA maps it to σ, toLowerCase to the final ς (`mail.ΒΑΣ`).
 * Such a domain is refused; typed in lower case it is accepted.
 */
export function caseStable(domain: string): boolean {
  return /^[A-Za-z0-9.-]*$/.test(domain) || domainToASCII(domain) === domainToASCII(domain.toLowerCase());
}

/** Whether IDNA (UTS 46) takes this lower-case domain to DNS unchanged (an ASCII or a U-label form). */
export function idnaStable(domain: string): boolean {
  const ascii = domainToASCII(domain);
  return !!ascii && (ascii === domain || domainToUnicode(ascii) === domain);
}

/** An email address field (see isEmailAddress); the length is checked by its own decorator. */
export const IsEmailAddress = (options?: ValidationOptions): PropertyDecorator =>
  ValidateBy(
    {
      name: 'isEmail',
      validator: {
        validate: (value) => isEmailAddress(value),
        defaultMessage: (args) => `${args?.property} must be an email`,
      },
    },
    options,
  );
