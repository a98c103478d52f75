import { ValidateBy, ValidationOptions } from 'class-validator';
import { isIP } from 'node:net';
import { classifyAddress, isLocalhostName } from '../webhooks/url-policy';

const UNSAFE = /[\s\p{Cc}\p{Cf}\\]/u;

/**
 * Whether an agent's `logo_url` may be shown to end users (UserAgentResponse.agent_logo_url): an
 * absolute https URL (a page served over https blocks other images) with a host name or a public
 * IP address, no credentials and no fragment. Every end user's browser loads it, so it must not
 * point them at their own machine or network (`https://127.0.0.1/...`, `localhost`, 10/8, ...)
 * nor carry a password in the clear.
 */
export function isLogoUrl(value: unknown): boolean {
  // whitespace, controls, format characters (bidi overrides, zero-width) and backslashes: the URL
  // parser drops or rewrites them, so the string checked would not be the string a browser reads
  if (typeof value !== 'string' || UNSAFE.test(value)) return false;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return false;
  }
  // the stored spelling (canonicalLogoUrl) within the documented 2048
  if (url.href.length > 2048) return false;
  if (url.protocol !== 'https:' || url.username || url.password || value.includes('#') || !url.hostname) return false;
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  if (isLocalhostName(host)) return false;
  if (isIP(host)) return classifyAddress(host) === 'public';
  // a name: at least two labels (no bare intranet names)
  return /^[a-z0-9-]+(\.[a-z0-9-]+)+\.?$/i.test(host);
}

/**
 * The stored spelling of a logo URL that passed isLogoUrl: the URL parser's serialization
 * (percent-encoded, host lower-cased), so what end users' browsers load is what was checked and
 * no double quote, space or angle bracket reaches a page that shows it (a single quote stays, as the
 * URL standard leaves it: a page still escapes what it puts in an attribute).
 */
export function canonicalLogoUrl(value: string): string;
export function canonicalLogoUrl(value: string | null | undefined): string | null | undefined;
export function canonicalLogoUrl(value: string | null | undefined): string | null | undefined {
  return typeof value === 'string' ? new URL(value).href : value;
}

export const IsLogoUrl = (options?: ValidationOptions): PropertyDecorator =>
  ValidateBy(
    {
      name: 'isLogoUrl',
      validator: {
        validate: isLogoUrl,
        defaultMessage: (a) => `${a?.property} must be an https URL of a public host, without credentials or fragment`,
      },
    },
    options,
  );
