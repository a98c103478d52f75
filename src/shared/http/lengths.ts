import { buildMessage, ValidateBy, ValidationArguments, ValidationOptions } from 'class-validator';
import { normalizePassword } from '../crypto/password-hasher';

/**
 * String lengths as the OpenAPI document states them (JSON Schema minLength/maxLength: Unicode
 * code points) and as the spec's "(1-100)" constraints read: class-validator's own Length,
 * MinLength and MaxLength (validator.js isLength) also leave out every U+FE0E/U+FE0F variation
 * selector, so "❤️" x 50 (100 code points) passed a 50-character limit and "a\uFE0F" failed a
 * 2-character minimum. Same names, constraint names and messages as class-validator's, so errors
 * read as before.
 */
export function codePoints(value: string): number {
  let n = 0;
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    // a high surrogate followed by a low one is one code point
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < value.length) {
      const d = value.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) i++;
    }
    n++;
  }
  return n;
}

/** Whether `value` is a string of `min` to `max` code points (class-validator's `length`, counted as above). */
export function length(value: unknown, min: number, max?: number): boolean {
  if (typeof value !== 'string') return false;
  const n = codePoints(value);
  return n >= min && (max === undefined || n <= max);
}

export function Length(min: number, max?: number, options?: ValidationOptions): PropertyDecorator {
  return ValidateBy(
    {
      name: 'isLength',
      constraints: [min, max],
      validator: {
        validate: (value, args): boolean => length(value, args?.constraints[0], args?.constraints[1]),
        defaultMessage: buildMessage((eachPrefix, args) => {
          // with { each: true } the value is the whole array: word the message after the element that failed
          const value: unknown = eachPrefix && Array.isArray(args?.value) ? args.value.find((v) => !length(v, args.constraints[0], args.constraints[1])) : args?.value;
          const n = typeof value === 'string' ? codePoints(value) : 0;
          if (n < args?.constraints[0]) return `${eachPrefix}$property must be longer than or equal to $constraint1 characters`;
          if (args?.constraints[1] !== undefined && n > args.constraints[1]) return `${eachPrefix}$property must be shorter than or equal to $constraint2 characters`;
          return `${eachPrefix}$property must be longer than or equal to $constraint1 and shorter than or equal to $constraint2 characters`;
        }, options),
      },
    },
    options,
  );
}

export function MinLength(min: number, options?: ValidationOptions): PropertyDecorator {
  return ValidateBy(
    {
      name: 'minLength',
      constraints: [min],
      validator: {
        validate: (value, args): boolean => length(value, args?.constraints[0]),
        defaultMessage: buildMessage((eachPrefix) => `${eachPrefix}$property must be longer than or equal to $constraint1 characters`, options),
      },
    },
    options,
  );
}

export function MaxLength(max: number, options?: ValidationOptions): PropertyDecorator {
  return ValidateBy(
    {
      name: 'maxLength',
      constraints: [max],
      validator: {
        validate: (value, args): boolean => length(value, 0, args?.constraints[0]),
        defaultMessage: buildMessage((eachPrefix) => `${eachPrefix}$property must be shorter than or equal to $constraint1 characters`, options),
      },
    },
    options,
  );
}

/**
 * The length of a password as it is hashed and compared: code points of its NFKC form
 * (normalizePassword), not of the string as typed. Counted as typed, twelve code points of six
 * decomposed letters ("e\u0301" x 6) passed a 12 minimum and stored a 6-character password, and a
 * 129-code-point spelling of a 128-character password was refused while its composed spelling
 * was accepted.
 */
export function passwordLength(value: unknown, min: number, max?: number): boolean {
  return typeof value === 'string' && length(normalizePassword(value), min, max);
}

/** OpenAPI description of a PasswordLength field (minLength/maxLength state the bounds). */
export const PASSWORD_LENGTH_DOC = 'length counted in Unicode code points after NFKC normalization (the form that is hashed)';
/** OpenAPI description of a CurrentPasswordLength field. */
export const CURRENT_PASSWORD_LENGTH_DOC =
  'length counted in Unicode code points after NFKC normalization (the form that is compared); a password whose form as typed is within the bounds is accepted too (set before that count)';

/** `asTyped`: count the form as typed (CurrentPasswordLength refuses only when both forms are out of bounds: the message names the one the user sees). */
function passwordLengthMessage(options: ValidationOptions | undefined, asTyped = false): (args?: ValidationArguments) => string {
  return buildMessage((eachPrefix, args) => {
    const n = typeof args?.value === 'string' ? codePoints(asTyped ? args.value : normalizePassword(args.value)) : 0;
    if (n < args?.constraints[0]) return `${eachPrefix}$property must be longer than or equal to $constraint1 characters`;
    if (args?.constraints[1] !== undefined && n > args.constraints[1]) return `${eachPrefix}$property must be shorter than or equal to $constraint2 characters`;
    return `${eachPrefix}$property must be longer than or equal to $constraint1 and shorter than or equal to $constraint2 characters`;
  }, options);
}

/**
 * Length of a password being set (register, signup, reset, change): `min` to `max` code points of
 * its NFKC form (passwordLength). Constraint name and messages as Length's.
 */
export function PasswordLength(min: number, max?: number, options?: ValidationOptions): PropertyDecorator {
  return ValidateBy(
    {
      name: 'isLength',
      constraints: [min, max],
      validator: {
        validate: (value, args): boolean => passwordLength(value, args?.constraints[0], args?.constraints[1]),
        defaultMessage: passwordLengthMessage(options),
      },
    },
    options,
  );
}

/**
 * Length of a password checked against a stored hash (sign-in, re-authentication, step-up): as
 * PasswordLength, the NFKC form's code points; but a password whose form as typed is within the
 * bounds is not refused either. Hashes made before normalization are of the typed form, and
 * passwords set before the length was counted after normalization may have an NFKC form out of
 * the bounds (six decomposed letters): refusing them here would lock their owners out of signing
 * in with a 400 instead of letting the hash decide. Anything this accepts beyond PasswordLength
 * was accepted before.
 */
export function CurrentPasswordLength(min: number, max?: number, options?: ValidationOptions): PropertyDecorator {
  return ValidateBy(
    {
      name: 'isLength',
      constraints: [min, max],
      validator: {
        validate: (value, args): boolean => passwordLength(value, args?.constraints[0], args?.constraints[1]) || length(value, args?.constraints[0], args?.constraints[1]),
        defaultMessage: passwordLengthMessage(options, true),
      },
    },
    options,
  );
}
