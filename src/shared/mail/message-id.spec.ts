import { randomBytes } from 'crypto';
import { mailMessageId, messageIdKey } from './mail.processor';

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
