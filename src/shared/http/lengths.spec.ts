import { validate } from 'class-validator';
import { codePoints, CurrentPasswordLength, Length, length, MaxLength, MinLength, passwordLength, PasswordLength } from './lengths';

class Dto {
  @Length(2, 4) l!: string;
  @MinLength(2) min!: string;
  @MaxLength(3) max!: string;
}

const dto = (l: string, min = 'ok', max = 'ok') => Object.assign(new Dto(), { l, min, max });

describe('code-point lengths', () => {
  it('counts code points: a surrogate pair once, a variation selector and a lone surrogate once each', () => {
    expect(codePoints('')).toBe(0);
    expect(codePoints('abc')).toBe(3);
    expect(codePoints('\u{1F600}')).toBe(1);
    expect(codePoints('\u2764\uFE0F')).toBe(2);
    expect(codePoints('\uD800x')).toBe(2);
    expect(codePoints('e\u0301')).toBe(2);
    expect(length('\u{1F600}\u{1F600}', 2, 2)).toBe(true);
    expect(length(5, 0)).toBe(false);
  });

  it('refuses and accepts as JSON Schema minLength/maxLength would, with class-validator\'s constraint names and messages', async () => {
    expect(await validate(dto('ab'))).toEqual([]);
    expect(await validate(dto('\u{1F600}\u{1F600}\u{1F600}\u{1F600}'))).toEqual([]);
    const [short] = await validate(dto('a'));
    expect(short.constraints).toEqual({ isLength: 'l must be longer than or equal to 2 characters' });
    const [long] = await validate(dto('\u2764\uFE0F\u2764\uFE0F\u2764'));
    expect(long.constraints).toEqual({ isLength: 'l must be shorter than or equal to 4 characters' });
    const errors = await validate(dto('ab', 'a', '\u2764\uFE0F\u2764\uFE0F'));
    expect(errors.map((e) => e.constraints)).toEqual([{ minLength: 'min must be longer than or equal to 2 characters' }, { maxLength: 'max must be shorter than or equal to 3 characters' }]);
  });

  it('words an { each: true } message after the element that failed, not the array', async () => {
    class Each {
      @Length(2, 4, { each: true }) l!: string[];
    }
    const each = (l: string[]) => Object.assign(new Each(), { l });
    expect(await validate(each(['ab', 'abcd']))).toEqual([]);
    expect((await validate(each(['ab', 'abcde'])))[0].constraints).toEqual({ isLength: 'each value in l must be shorter than or equal to 4 characters' });
    expect((await validate(each(['ab', 'a'])))[0].constraints).toEqual({ isLength: 'each value in l must be longer than or equal to 2 characters' });
  });
});

class PasswordDto {
  @PasswordLength(12, 128) password!: string;
}

class CurrentPasswordDto {
  @CurrentPasswordLength(12, 128) password!: string;
}

const E_ACUTE_NFD = 'e\u0301'; // two code points, one after NFKC
const pw = (password: unknown) => Object.assign(new PasswordDto(), { password });
const current = (password: unknown) => Object.assign(new CurrentPasswordDto(), { password });

describe('password lengths: counted on the NFKC form, the one that is hashed', () => {
  it('passwordLength counts the code points of the NFKC form', () => {
    expect(passwordLength(E_ACUTE_NFD.repeat(6), 12, 128)).toBe(false); // 12 as typed, 6 hashed
    expect(passwordLength(E_ACUTE_NFD.repeat(6) + 'p'.repeat(6), 12, 128)).toBe(true); // 18 as typed, 12 hashed
    expect(passwordLength('\u00e9'.repeat(6) + 'p'.repeat(6), 12, 12)).toBe(true);
    expect(passwordLength(E_ACUTE_NFD + 'p'.repeat(127), 12, 128)).toBe(true); // 129 as typed, 128 hashed
    expect(passwordLength('\ufb01'.repeat(7), 12, 128)).toBe(true); // ligature fi x 7: 7 as typed, 14 hashed
    expect(passwordLength('\ufdfa'.repeat(8), 12, 128)).toBe(false); // 8 as typed, 144 hashed
    expect(passwordLength('\u{1F600}'.repeat(12), 12, 12)).toBe(true); // a surrogate pair is one
    expect(passwordLength(12345678901234, 12, 128)).toBe(false);
  });

  it('PasswordLength refuses what hashes shorter or longer than the bounds, with Length\'s constraint name and messages', async () => {
    expect(await validate(pw('p'.repeat(12)))).toEqual([]);
    expect(await validate(pw(E_ACUTE_NFD.repeat(6) + 'p'.repeat(6)))).toEqual([]);
    expect(await validate(pw(E_ACUTE_NFD + 'p'.repeat(127)))).toEqual([]);
    const [short] = await validate(pw(E_ACUTE_NFD.repeat(6)));
    expect(short.constraints).toEqual({ isLength: 'password must be longer than or equal to 12 characters' });
    const [long] = await validate(pw('\ufdfa'.repeat(8)));
    expect(long.constraints).toEqual({ isLength: 'password must be shorter than or equal to 128 characters' });
    const [notString] = await validate(pw(undefined));
    expect(notString.constraints).toEqual({ isLength: 'password must be longer than or equal to 12 characters' });
  });

  it('CurrentPasswordLength accepts the NFKC form within the bounds, and also the form as typed (passwords set before)', async () => {
    expect(await validate(current('\u00e9'.repeat(6) + 'p'.repeat(6)))).toEqual([]);
    expect(await validate(current(E_ACUTE_NFD + 'p'.repeat(127)))).toEqual([]); // 129 as typed, 128 compared
    expect(await validate(current(E_ACUTE_NFD.repeat(6)))).toEqual([]); // 12 as typed: as before
    expect(await validate(current('\ufdfa'.repeat(12)))).toEqual([]); // 12 as typed, 216 compared: as before
    const [short] = await validate(current('\u00e9'.repeat(6)));
    expect(short.constraints).toEqual({ isLength: 'password must be longer than or equal to 12 characters' });
    const [long] = await validate(current('p'.repeat(129)));
    expect(long.constraints).toEqual({ isLength: 'password must be shorter than or equal to 128 characters' });
    // both forms out of bounds: the message speaks of the one the user typed (11, too short), not of its 198-code-point NFKC form
    const [typed] = await validate(current('\ufdfa'.repeat(11)));
    expect(typed.constraints).toEqual({ isLength: 'password must be longer than or equal to 12 characters' });
  });
});
