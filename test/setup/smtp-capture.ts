import { SMTPServer } from 'smtp-server';
import type { AddressInfo } from 'net';

/** One message the capture server accepted. */
export interface CapturedMail {
  /** envelope sender and recipients (RCPT TO) */
  from: string;
  to: string[];
  subject: string;
  /** top-level headers, lower-case names, unfolded (last occurrence wins) */
  headers: Record<string, string>;
  /** decoded text/plain part ('' when absent) */
  text: string;
  /** decoded text/html part ('' when absent) */
  html: string;
  raw: string;
}

export interface SmtpCapture {
  /** smtp://127.0.0.1:<port>, for SMTP_URL */
  url: string;
  messages: CapturedMail[];
  /** RCPT TO commands answered with a temporary failure by `failNext` */
  rejected: number;
  /** SMTP connections the server accepted */
  connections: number;
  /** Answers the next `count` matching RCPT TO with `451` (a temporary failure: the sender retries), or `responseCode` (550: a permanent one). */
  failNext(count: number, match?: (recipient: string) => boolean, responseCode?: number): void;
  /** Drops every pending `failNext` rule. */
  clearFailures(): void;
  /** The first message (already received or still to come) matching `predicate`. */
  waitFor(predicate: (m: CapturedMail) => boolean, timeoutMs?: number): Promise<CapturedMail>;
  /** Resolves once `count` messages match `predicate` (there may be more). */
  waitForCount(predicate: (m: CapturedMail) => boolean, count: number, timeoutMs?: number): Promise<CapturedMail[]>;
  close(): Promise<void>;
}

/**
 * A real SMTP server on 127.0.0.1 (random port, no TLS, no auth) that keeps every message, for
 * e2e tests of anything that sends mail: point SMTP_URL at `url` before starting the worker.
 */
export async function startSmtpCapture(): Promise<SmtpCapture> {
  const messages: CapturedMail[] = [];
  const listeners = new Set<() => void>();
  let failures: { left: number; match: (r: string) => boolean; responseCode: number }[] = [];
  const capture = { rejected: 0, connections: 0 } as SmtpCapture;

  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    socketTimeout: 10_000,
    closeTimeout: 1_000,
    onConnect(_session, callback) {
      capture.connections += 1;
      callback();
    },
    onRcptTo(address, _session, callback) {
      const rule = failures.find((f) => f.left > 0 && f.match(address.address));
      if (rule) {
        rule.left -= 1;
        failures = failures.filter((f) => f.left > 0);
        capture.rejected += 1;
        // quoting the recipient, as real servers do (Postfix: `550 5.1.1 <a@example.com>: Recipient address rejected`)
        const message = rule.responseCode >= 500 ? `5.1.1 <${address.address}>: mailbox unavailable (test)` : `4.3.2 <${address.address}>: try again later (test)`;
        return callback(Object.assign(new Error(message), { responseCode: rule.responseCode }));
      }
      callback();
    },
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        const raw = Buffer.concat(chunks).toString('utf8');
        const from = session.envelope.mailFrom ? session.envelope.mailFrom.address : '';
        messages.push(parseMail(raw, from, session.envelope.rcptTo.map((r) => r.address)));
        for (const l of [...listeners]) l();
        callback();
      });
    },
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const port = (server.server.address() as AddressInfo).port;

  function waitForCount(predicate: (m: CapturedMail) => boolean, count: number, timeoutMs = 10_000): Promise<CapturedMail[]> {
    return new Promise((resolve, reject) => {
      const check = (): boolean => {
        const found = messages.filter(predicate);
        if (found.length < count) return false;
        clearTimeout(timer);
        listeners.delete(check);
        resolve(found);
        return true;
      };
      const timer = setTimeout(() => {
        listeners.delete(check);
        reject(new Error(`smtp capture: ${messages.filter(predicate).length}/${count} matching message(s) after ${timeoutMs} ms (${messages.length} received)`));
      }, timeoutMs);
      if (!check()) listeners.add(check);
    });
  }

  return Object.assign(capture, {
    url: `smtp://127.0.0.1:${port}`,
    messages,
    failNext(count: number, match: (recipient: string) => boolean = () => true, responseCode = 451) {
      failures.push({ left: count, match, responseCode });
    },
    clearFailures() {
      failures = [];
    },
    waitFor: async (predicate: (m: CapturedMail) => boolean, timeoutMs?: number) => (await waitForCount(predicate, 1, timeoutMs))[0],
    waitForCount,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  });
}

/** Minimal MIME parsing: headers, nested multiparts, quoted-printable and base64 bodies. */
export function parseMail(raw: string, from = '', to: string[] = []): CapturedMail {
  const { headers, body } = splitEntity(raw);
  const parts: { type: string; content: string }[] = [];
  collectParts(headers, body, parts);
  return {
    from,
    to,
    subject: decodeWords(headers.subject ?? ''),
    headers,
    text: parts.find((p) => p.type === 'text/plain')?.content ?? '',
    html: parts.find((p) => p.type === 'text/html')?.content ?? '',
    raw,
  };
}

function splitEntity(entity: string): { headers: Record<string, string>; body: string } {
  const m = /\r?\n\r?\n/.exec(entity);
  const head = m ? entity.slice(0, m.index) : entity;
  const body = m ? entity.slice(m.index + m[0].length) : '';
  const headers: Record<string, string> = {};
  // RFC 5322 2.2.3: unfolding removes the CRLF before leading whitespace
  for (const line of head.replace(/\r?\n(?=[ \t])/g, '').split(/\r?\n/)) {
    const i = line.indexOf(':');
    if (i > 0) headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
  }
  return { headers, body };
}

function collectParts(headers: Record<string, string>, body: string, out: { type: string; content: string }[]): void {
  const contentType = headers['content-type'] ?? 'text/plain';
  const type = contentType.split(';')[0].trim().toLowerCase();
  if (type.startsWith('multipart/')) {
    const boundary = /boundary="?([^";]+)"?/i.exec(contentType)?.[1];
    if (!boundary) return;
    const sections = body.split(`--${boundary}`);
    // sections[0] is the preamble; the one starting with `--` is the epilogue
    for (const section of sections.slice(1)) {
      if (section.startsWith('--')) break;
      const part = splitEntity(section.replace(/^\r?\n/, ''));
      collectParts(part.headers, part.body, out);
    }
    return;
  }
  const encoding = (headers['content-transfer-encoding'] ?? '7bit').toLowerCase();
  const charset = (/charset="?([^";]+)"?/i.exec(contentType)?.[1] ?? 'utf-8').toLowerCase();
  let bytes: Buffer;
  if (encoding === 'quoted-printable') bytes = decodeQuotedPrintable(body);
  else if (encoding === 'base64') bytes = Buffer.from(body.replace(/\s+/g, ''), 'base64');
  else bytes = Buffer.from(body, 'utf8');
  const content = bytes.toString(charset === 'utf-8' || charset === 'utf8' ? 'utf8' : 'latin1').replace(/\r\n/g, '\n').replace(/\n$/, '');
  out.push({ type, content });
}

/** RFC 2045 6.7: `=` at a line end is a soft break; `=XX` is one byte. */
export function decodeQuotedPrintable(s: string): Buffer {
  const src = Buffer.from(s.replace(/=\r?\n/g, ''), 'utf8');
  const out: number[] = [];
  const hex = /^[0-9A-Fa-f]{2}$/;
  for (let i = 0; i < src.length; i++) {
    const pair = src.subarray(i + 1, i + 3).toString('latin1');
    if (src[i] === 0x3d && hex.test(pair)) {
      out.push(parseInt(pair, 16));
      i += 2;
    } else out.push(src[i]);
  }
  return Buffer.from(out);
}

/** RFC 2047 encoded words (`=?UTF-8?Q?...?=`, `=?UTF-8?B?...?=`) in a header value. */
function decodeWords(value: string): string {
  return value
    .replace(/(=\?[^?]+\?[QqBb]\?[^?]*\?=)\s+(?==\?)/g, '$1')
    .replace(/=\?([^?]+)\?([QqBb])\?([^?]*)\?=/g, (_m, _charset: string, enc: string, text: string) =>
      enc.toUpperCase() === 'B' ? Buffer.from(text, 'base64').toString('utf8') : decodeQuotedPrintable(text.replace(/_/g, ' ')).toString('utf8'),
    );
}
