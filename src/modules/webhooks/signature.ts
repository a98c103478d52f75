import { createHmac, randomBytes } from 'crypto';

/** Prefix of webhook signing secrets (Standard Webhooks). */
export const SECRET_PREFIX = 'whsec_';

/** `whsec_` + base64 of 32 random bytes: shown once at creation, stored envelope-encrypted. */
export function generateWebhookSecret(): string {
  return `${SECRET_PREFIX}${randomBytes(32).toString('base64')}`;
}

/**
 * Standard Webhooks signature: `v1,` + base64 HMAC-SHA256 over `${id}.${timestamp}.${body}`,
 * keyed with the base64-decoded part of the secret after `whsec_`.
 */
export function signWebhook(secret: string, id: string, timestampSeconds: number, body: string): string {
  const key = Buffer.from(secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret, 'base64');
  return `v1,${createHmac('sha256', key).update(`${id}.${timestampSeconds}.${body}`).digest('base64')}`;
}

/**
 * The headers of one delivery attempt (the timestamp is the attempt's, the id the message's). With
 * several secrets (the current one, then one a rotation replaced and still in its overlap), one
 * signature each, space-separated: a receiver accepts the message when any of them verifies.
 */
export function webhookHeaders(secrets: string | string[], id: string, body: string, now = Date.now()): Record<string, string> {
  const ts = Math.floor(now / 1000);
  const signatures = (Array.isArray(secrets) ? secrets : [secrets]).map((s) => signWebhook(s, id, ts, body));
  return { 'webhook-id': id, 'webhook-timestamp': String(ts), 'webhook-signature': signatures.join(' ') };
}
