import * as http from 'http';
import * as https from 'https';
import { LookupAll, parseWebhookUrl, pinnedLookup, resolveAndCheck, WebhookDnsError, WebhookUrlError, WebhookUrlPolicy } from '../url-policy';

/** The outcome of one attempt: a status code when the receiver answered, else an error. */
export interface SendResult {
  ok: boolean;
  statusCode: number | null;
  /** a short description safe for the delivery log: no addresses, no secrets, no response body */
  error: string | null;
}

export interface SendOptions {
  timeoutMs: number;
  policy: WebhookUrlPolicy;
  /** resolver of every address of a host (default: c-ares A + AAAA, see url-policy.ts) */
  lookupAll?: LookupAll;
}

export const USER_AGENT = 'authp-webhooks/1.0';

class AttemptTimeout extends Error {}

/** Maps a network error to a log-safe description (Node's messages carry addresses). */
export function describeError(err: unknown, timeoutMs: number): string {
  if (err instanceof AttemptTimeout) return `timeout after ${timeoutMs} ms`;
  if (err instanceof WebhookDnsError) return err.reason === 'timeout' ? `dns lookup timed out after ${err.timeoutMs} ms` : 'dns lookup failed';
  if (err instanceof WebhookUrlError) return `url ${err.message}`;
  const code = String((err as NodeJS.ErrnoException)?.code ?? '');
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return 'dns lookup failed';
  if (code === 'ECONNREFUSED') return 'connection refused';
  if (code === 'ECONNRESET' || code === 'EPIPE' || /socket hang up/i.test(String((err as Error)?.message))) return 'connection reset';
  if (code === 'ETIMEDOUT') return 'connect timeout';
  if (code === 'EHOSTUNREACH' || code === 'ENETUNREACH') return 'host unreachable';
  if (/CERT|TLS|SSL|SELF_SIGNED|UNABLE_TO_VERIFY/.test(code)) return `tls error (${code})`;
  return /^[A-Z0-9_]{1,40}$/.test(code) ? `request failed (${code})` : 'request failed';
}

/**
 * POSTs one webhook attempt: the URL is checked against the policy again (the host resolved, every
 * address checked) and the connection goes to the addresses that were checked; no redirects are
 * followed (3xx is a failure). `timeoutMs` bounds the whole attempt, from the DNS lookup to the
 * response headers; a lookup still running then is cancelled, so nothing of the attempt outlives
 * it (the tenant's delivery slot is held until here), and every attempt settles by then, whatever the
 * receiver does (a 101 or a socket closed without an answer is a failure). 2xx is a delivery.
 */
export async function postWebhook(rawUrl: string, body: string, headers: Record<string, string>, opts: SendOptions): Promise<SendResult> {
  const deadline = Date.now() + opts.timeoutMs;
  const expired = new AbortController();
  const expiry = setTimeout(() => expired.abort(), opts.timeoutMs);
  let url: URL;
  let addresses: Awaited<ReturnType<typeof resolveAndCheck>>;
  try {
    url = parseWebhookUrl(rawUrl, opts.policy);
    addresses = await resolveAndCheck(url, opts.policy, { lookupAll: opts.lookupAll, timeoutMs: opts.timeoutMs, signal: expired.signal });
  } catch (err) {
    clearTimeout(expiry);
    return { ok: false, statusCode: null, error: describeError(err, opts.timeoutMs) };
  }
  clearTimeout(expiry);
  const client = url.protocol === 'https:' ? https : http;
  return new Promise<SendResult>((resolve) => {
    let settled = false;
    const finish = (r: SendResult) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(r);
    };
    const req = client.request(
      url,
      {
        method: 'POST',
        agent: false,
        lookup: pinnedLookup(addresses),
        headers: {
          'content-type': 'application/json',
          'content-length': String(Buffer.byteLength(body)),
          'user-agent': USER_AGENT,
          ...headers,
        },
      },
      (res) => {
        const status = res.statusCode ?? 0;
        // the body is not needed: drain a little, then let the socket go
        let seen = 0;
        res.on('data', (chunk: Buffer) => {
          seen += chunk.length;
          if (seen > 64 * 1024) res.destroy();
        });
        res.on('error', () => undefined);
        setTimeout(() => res.destroy(), 1000).unref();
        const ok = status >= 200 && status < 300;
        finish({ ok, statusCode: status, error: ok ? null : `HTTP ${status}` });
      },
    );
    const fail = (err: unknown) => finish({ ok: false, statusCode: null, error: describeError(err, opts.timeoutMs) });
    // the timer settles the attempt itself: destroying a request that is already destroyed emits nothing
    const timer = setTimeout(() => {
      const timeout = new AttemptTimeout();
      req.destroy(timeout);
      fail(timeout);
    }, Math.max(0, deadline - Date.now()));
    req.on('error', fail);
    // a 101 Switching Protocols emits neither 'response' nor 'error' (Node hands the socket to
    // 'upgrade' listeners, or destroys it): it is an answer, and not a 2xx
    req.on('upgrade', (res, socket) => {
      socket.destroy();
      finish({ ok: false, statusCode: res.statusCode ?? 101, error: `HTTP ${res.statusCode ?? 101}` });
    });
    // closed before any answer or error (after a response, `finish` has already run)
    req.on('close', () => fail(Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' })));
    req.end(body);
  });
}
