import { isURL, ValidateBy, ValidationOptions } from 'class-validator';

// RFC 8252 section 7.3: loopback redirects, as the WHATWG URL parser spells their host
const LOOPBACK_HOSTS = new Set(['127.0.0.1', '[::1]', 'localhost']);
// RFC 3986 section 3.1 scheme; RFC 8252 section 7.1: a private-use scheme is a reverse domain name
const SCHEME = /^([A-Za-z][A-Za-z0-9+.-]*):/;
const REVERSE_DOMAIN = /^[a-z][a-z0-9+-]*(\.[a-z0-9+-]+)+$/;
// whitespace, controls and backslashes: a browser would read such a URI differently from the string matched
const UNSAFE = /[\s\p{Cc}\\]/u;
const HTTP_URL = { require_protocol: true, require_tld: false, protocols: ['https', 'http'], allow_fragments: false, disallow_auth: true };

/**
 * What is wrong with a redirect URI a client registers, or null when it is acceptable: an absolute
 * URI without fragment or userinfo; https, http on a loopback host only, or a native app's
 * private-use scheme (`com.example.app:/cb`).
 */
export function redirectUriProblem(uri: string): string | null {
  const scheme = SCHEME.exec(uri)?.[1].toLowerCase();
  if (!scheme || UNSAFE.test(uri)) return 'must be an absolute URI';
  // RFC 6749 section 3.1.2: the redirection endpoint URI MUST NOT include a fragment component
  if (uri.includes('#')) return 'must not contain a fragment (RFC 6749 section 3.1.2)';
  // RFC 9700 section 2.1 / RFC 3986 section 3.2.1: credentials in a URI are deprecated and mislead users
  if (/^[^:]+:\/\/[^/?]*@/.test(uri)) return 'must not contain userinfo (user:password@)';
  let url: URL;
  try {
    url = new URL(uri);
  } catch {
    return 'must be an absolute URI';
  }
  if (scheme === 'https' || scheme === 'http') {
    if (!/^https?:\/\//i.test(uri) || !isURL(uri, HTTP_URL)) return 'must be an absolute URI';
    // RFC 9700 section 2.6, RFC 8252 section 8.3: plain http only to the device itself
    if (scheme === 'http' && !LOOPBACK_HOSTS.has(url.hostname)) return 'must use https (http only for a loopback host: 127.0.0.1, [::1] or localhost)';
    return null;
  }
  if (!REVERSE_DOMAIN.test(scheme)) return 'must use https, http on a loopback host, or a private-use scheme named as a reverse domain such as com.example.app (RFC 8252 section 7.1)';
  if (url.username || url.password) return 'must not contain userinfo (user:password@)';
  if (uri.length === scheme.length + 1) return 'must be an absolute URI';
  return null;
}

/** Each redirect URI passes redirectUriProblem; the message names each offending entry. */
export const IsRedirectUri = (options?: ValidationOptions): PropertyDecorator =>
  ValidateBy(
    {
      name: 'isRedirectUri',
      validator: {
        validate: (value) => typeof value === 'string' && redirectUriProblem(value) === null,
        defaultMessage: (args) => {
          const values: unknown[] = Array.isArray(args?.value) ? args.value : [args?.value];
          const problems = values.flatMap((v, i) => {
            const p = typeof v === 'string' ? redirectUriProblem(v) : null;
            return p ? [`${args?.property}.${i} ${p}`] : [];
          });
          return problems.length ? problems.join('; ') : `${args?.property} must hold absolute URIs`;
        },
      },
    },
    options,
  );
