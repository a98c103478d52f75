import { slugify } from './slug';

describe('slugify', () => {
  it.each([
    ['Acme Inc.', 'acme-inc'],
    ['  Ünïcode & Co  ', 'unicode-co'],
    ['日本語', 'tenant'],
    ['A', 'tenant-a'],
    ['x'.repeat(60), 'x'.repeat(40)],
  ])('%s -> %s', (name, slug) => expect(slugify(name)).toBe(slug));
});
