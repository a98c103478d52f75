import { disposableEmailBlocklistSet } from 'disposable-email-domains-js';
import { ErrorCode } from '../../../shared/errors/error-codes';
import { domainToASCII } from 'url';
import { canonicalDomain, normalizeEmail } from '../../users/email';

/** The tenant settings (spec 2.8 and PutEmailDomainsRequest) an address is checked against. */
export interface EmailPolicySettings {
  block_disposable_emails: boolean;
  block_email_subaddresses: boolean;
  email_allowlist: string[];
  email_blocklist: string[];
}

let disposable: Set<string> | undefined;

/** The maintained disposable-domain list (disposable-email-domains-js), loaded once. */
function disposableDomains(): Set<string> {
  return (disposable ??= disposableEmailBlocklistSet());
}

/** The domain and each parent: a.b.example.com, b.example.com, example.com, com. */
function withParents(domain: string): string[] {
  const labels = domain.split('.');
  return labels.map((_, i) => labels.slice(i).join('.')).filter(Boolean);
}

/** A list entry covers its domain and every subdomain of it. */
export function domainMatches(domain: string, entry: string): boolean {
  return domain === entry || domain.endsWith(`.${entry}`);
}

/** The part after the last `@` of the address's comparison key (normalizeEmail: NFKC, case-folded), without a trailing dot. */
export function emailDomain(email: string): string {
  const key = normalizeEmail(email);
  return key.slice(key.lastIndexOf('@') + 1).replace(/\.+$/, '');
}

/**
 * Why the tenant refuses an address, or null (issue 5 item 8). Each rule has its own code:
 * blocklist (subdomains included), allowlist when non-empty (subdomains included), disposable
 * domains (a subdomain of a listed domain counts), `+` subaddresses.
 */
export function emailRefusal(s: EmailPolicySettings, email: string): ErrorCode | null {
  const domain = emailDomain(email);
  const local = email.slice(0, email.lastIndexOf('@'));
  // entries in the domain's form (one stored before entries were kept in it may be an A-label)
  if (s.email_blocklist.some((e) => domainMatches(domain, canonicalDomain(e)))) return 'email/domain_blocked';
  if (s.email_allowlist.length && !s.email_allowlist.some((e) => domainMatches(domain, canonicalDomain(e)))) return 'email/domain_not_allowed';
  if (s.block_disposable_emails) {
    // the maintained list has ASCII names, internationalized ones as A-labels
    const list = disposableDomains();
    const ascii = domainToASCII(domain) || domain;
    if ([...withParents(domain), ...withParents(ascii)].some((d) => list.has(d))) return 'email/disposable_blocked';
  }
  if (s.block_email_subaddresses && local.includes('+')) return 'email/subaddress_blocked';
  return null;
}
