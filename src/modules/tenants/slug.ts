import { randomBytes } from 'crypto';

/** A URL slug from a tenant name: lower-case ASCII letters, digits and dashes. */
export function slugify(name: string): string {
  const base = name
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 40)
    .replace(/-+$/g, '');
  return base.length >= 2 ? base : `tenant${base ? `-${base}` : ''}`;
}

/** A taken slug made unique: the name's slug (cut to fit, never ending in a dash: `aaa--0a3db4`) with a random suffix. */
export function suffixedSlug(base: string): string {
  return `${base.slice(0, 33).replace(/-+$/, '')}-${randomBytes(3).toString('hex')}`;
}
