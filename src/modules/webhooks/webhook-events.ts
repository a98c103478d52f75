/**
 * The event types a webhook endpoint may subscribe to: every event of spec 6 plus `user.claimed`
 * and `user.deleted` (an end user erased by a tenant owner, payload `{user_id}` only; or a guest
 * removed by the daily purge, `{user_id, reason: 'guest_retention'}`).
 * Not `tenant.created`: it happens before the tenant can have an endpoint (only endpoints that
 * existed at an event receive it), so a subscription to it could never deliver anything.
 * `*` subscribes to every event type, including ones added later; it must be the only entry.
 */
export const WEBHOOK_EVENT_TYPES = [
  // spec 6
  'oauth.token_exchange.issued',
  'oauth.token_exchange.subject_invalid',
  'oauth.token_exchange.scope_denied',
  'oauth.token_exchange.rate_limited',
  'oauth.token_exchange.client_unauthorized',
  'oauth.token_exchange.client_disabled',
  'oauth.token_exchange.revocation_requested',
  'agent.revoked',
  'agent.rate_limited',
  // platform
  'user.claimed',
  'user.deleted',
] as const;

export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

/** Subscribes an endpoint to every event type. */
export const ALL_EVENTS = '*';

/** The outbox topic (and BullMQ queue) the outbox relay hands webhook events to. */
export const WEBHOOK_TOPIC = 'webhook';

/** The BullMQ queue of single deliveries (one job per (event, endpoint)), with its own retries. */
export const WEBHOOK_DELIVERY_QUEUE = 'webhook-delivery';

/** Endpoints one tenant may register (each event fans out to all of them). */
export const MAX_ENDPOINTS_PER_TENANT = 20;

export function isWebhookEventType(v: unknown): v is WebhookEventType {
  return typeof v === 'string' && (WEBHOOK_EVENT_TYPES as readonly string[]).includes(v);
}
