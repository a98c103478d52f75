import { randomBytes } from 'crypto';
import { mailMessageId, messageIdDomain, messageIdKey } from './mail.processor';

describe('mailMessageId', () => {
  const kek = messageIdKey(randomBytes(32));
  const at = '2026-11-28T01:02:03.456Z';

  it('is the same for the same outbox row (every retry of one mail)', () => {
    expect(mailMessageId(kek, '41', at, 'example.com')).toBe(mailMessageId(kek, '41', new Date(at), 'example.com'));
  });

  it('is opaque: 32 hex characters that show neither the outbox id nor the time', () => {
    const id = mailMessageId(kek, '918273645', at, 'example.com');
    expect(id).toMatch(/^<[0-9a-f]{32}@example\.com>$/);
    expect(id).not.toContain('918273645');
    expect(id).not.toContain(String(Date.parse(at)));
  });

  it('differs between rows, between times of one id (a sequence handed out again) and between keys', () => {
    const ids = new Set([
      mailMessageId(kek, '41', at, 'example.com'),
      mailMessageId(kek, '42', at, 'example.com'),
      mailMessageId(kek, '41', '2026-11-28T01:02:03.457Z', 'example.com'),
      mailMessageId(messageIdKey(randomBytes(32)), '41', at, 'example.com'),
    ]);
    expect(ids.size).toBe(4);
  });
});

describe('messageIdDomain', () => {
  it("is EMAIL_FROM's domain, with or without a display name", () => {
    expect(messageIdDomain('no-reply@example.com')).toBe('example.com');
    expect(messageIdDomain('Auth Platform <no-reply@auth.example.com>')).toBe('auth.example.com');
    expect(messageIdDomain('"a@b" <no-reply@Example.COM>')).toBe('example.com');
  });

  it('is the A-label of an internationalised domain (not the name with its non-ASCII letters dropped: another domain)', () => {
    expect(messageIdDomain('no-reply@bücher.example')).toBe('xn--bcher-kva.example');
    expect(messageIdDomain('Bücher <no-reply@bücher.example>')).toBe('xn--bcher-kva.example');
  });

  it('is localhost without a domain', () => {
    expect(messageIdDomain('no-reply')).toBe('localhost');
    expect(messageIdDomain('no-reply@')).toBe('localhost');
  });
});
