import { slugify, suffixedSlug } from './slug';

describe('slugify', () => {
  it.each([
    ['Acme Inc.', 'acme-inc'],
    ['  Ünïcode & Co  ', 'unicode-co'],
    ['日本語', 'tenant'],
    ['A', 'tenant-a'],
    ['x'.repeat(60), 'x'.repeat(40)],
  ])('%s -> %s', (name, slug) => expect(slugify(name)).toBe(slug));
});

describe('suffixedSlug', () => {
  it('adds a random suffix to the slug cut to fit, with one dash between (never two)', () => {
    expect(suffixedSlug('acme')).toMatch(/^acme-[0-9a-f]{6}$/);
    const cutAtDash = slugify(`${'a'.repeat(32)} ${'b'.repeat(10)}`);
    expect(suffixedSlug(cutAtDash)).toMatch(new RegExp(`^${'a'.repeat(32)}-[0-9a-f]{6}$`));
    expect(suffixedSlug('x'.repeat(40))).toHaveLength(40);
  });
});
