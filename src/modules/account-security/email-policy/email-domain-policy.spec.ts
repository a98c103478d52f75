import { domainMatches, emailDomain, EmailPolicySettings, emailRefusal } from './email-domain-policy';

const base: EmailPolicySettings = { block_disposable_emails: false, block_email_subaddresses: false, email_allowlist: [], email_blocklist: [] };

describe('email domain policy (issue 5 item 8)', () => {
  it('matches a domain and its subdomains, not look-alikes', () => {
    expect(domainMatches('example.com', 'example.com')).toBe(true);
    expect(domainMatches('mail.eu.example.com', 'example.com')).toBe(true);
    expect(domainMatches('badexample.com', 'example.com')).toBe(false);
    expect(domainMatches('example.com.evil.io', 'example.com')).toBe(false);
  });

  it('reads the domain after the last @', () => {
    expect(emailDomain('"a@b"@Example.COM.')).toBe('example.com');
  });

  it('accepts everything by default', () => {
    expect(emailRefusal(base, 'a+b@mailinator.com')).toBeNull();
  });

  it('blocklist, subdomains included', () => {
    const s = { ...base, email_blocklist: ['corp.example'] };
    expect(emailRefusal(s, 'x@corp.example')).toBe('email/domain_blocked');
    expect(emailRefusal(s, 'x@eu.corp.example')).toBe('email/domain_blocked');
    expect(emailRefusal(s, 'x@notcorp.example')).toBeNull();
  });

  it('allowlist, subdomains included; the blocklist wins over it', () => {
    const s = { ...base, email_allowlist: ['acme.test'], email_blocklist: ['old.acme.test'] };
    expect(emailRefusal(s, 'x@acme.test')).toBeNull();
    expect(emailRefusal(s, 'x@team.acme.test')).toBeNull();
    expect(emailRefusal(s, 'x@other.test')).toBe('email/domain_not_allowed');
    expect(emailRefusal(s, 'x@old.acme.test')).toBe('email/domain_blocked');
  });

  it('disposable domains from the maintained list, and their subdomains', () => {
    const s = { ...base, block_disposable_emails: true };
    expect(emailRefusal(s, 'x@mailinator.com')).toBe('email/disposable_blocked');
    expect(emailRefusal(s, 'x@sub.mailinator.com')).toBe('email/disposable_blocked');
    expect(emailRefusal(s, 'x@gmail.com')).toBeNull();
  });

  it('subaddresses (+tag)', () => {
    const s = { ...base, block_email_subaddresses: true };
    expect(emailRefusal(s, 'a+tag@example.com')).toBe('email/subaddress_blocked');
    expect(emailRefusal(s, 'a.b-c@example.com')).toBeNull();
  });
});
