import { ValidateBy, ValidationOptions } from 'class-validator';

// C0/C1 controls (a newline, a bell), line and paragraph separators, and the bidirectional
// overrides and isolates that make a name read differently from what it is
const FORBIDDEN = /[\p{Cc}\u2028\u2029\u202A-\u202E\u2066-\u2069]/u;
// something a person sees: not only spaces, separators, invisible format characters, combining
// marks with nothing to combine with (variation selectors, the combining grapheme joiner) and the
// Hangul and Braille blanks
const VISIBLE = /[^\p{Z}\p{Cf}\p{M}\s\u115F\u1160\u2800\u3164\uFFA0]/u;

/** Whether a name shown to people (tenants, API keys, agents) is printable text. */
export function isDisplayName(value: unknown): boolean {
  return typeof value === 'string' && !FORBIDDEN.test(value) && VISIBLE.test(value);
}

/**
 * A name shown in the dashboard, the consent screen and emails: at least one visible character,
 * no control characters, no bidirectional overrides (emoji sequences with zero-width joiners stay
 * allowed). Lengths are checked by their own decorators.
 */
export const IsDisplayName = (options?: ValidationOptions): PropertyDecorator =>
  ValidateBy(
    {
      name: 'isDisplayName',
      validator: {
        validate: (value) => isDisplayName(value),
        defaultMessage: (args) => `${args?.property} must contain a visible character and no control characters`,
      },
    },
    options,
  );

// free text may span lines and hold tabs; every other control character, the line and paragraph
// separators and the bidirectional overrides and isolates stay out (they make text shown to
// people, in the dashboard, to end users or in a mail, read differently from what it is)
// eslint-disable-next-line no-control-regex -- control characters are exactly what is looked for
const FORBIDDEN_IN_TEXT = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F-\u009F\u2028\u2029\u202A-\u202E\u2066-\u2069]/u;

/** Whether free text shown to people (descriptions, hints) is free of controls and bidirectional overrides. */
export function isPlainText(value: unknown): boolean {
  return typeof value === 'string' && !FORBIDDEN_IN_TEXT.test(value);
}

/** Free text shown to people: tabs and line breaks allowed, no other control characters, no bidirectional overrides. */
export const IsPlainText = (options?: ValidationOptions): PropertyDecorator =>
  ValidateBy(
    {
      name: 'isPlainText',
      validator: {
        validate: (value) => isPlainText(value),
        defaultMessage: (args) => `${args?.property} must contain no control characters (but tabs and line breaks) and no bidirectional overrides`,
      },
    },
    options,
  );
