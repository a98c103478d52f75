import { validate } from 'class-validator';
import { codePoints, Length, length, MaxLength, MinLength } from './lengths';

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
});
