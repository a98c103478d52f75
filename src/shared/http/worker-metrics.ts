import { Registry } from 'prom-client';
import { outcomeCounter } from './metrics-registry';

/**
 * The worker's delivery counters, on the worker's /metrics (worker-health.ts) and never on the
 * API's: a mail or a webhook is delivered only by a worker, and an API showing these at zero would
 * read as "nothing delivered". One registry per process (tests run several worker contexts in one
 * process; their counts add up, as a process's counters do). Labels are fixed outcome names, never
 * a tenant, recipient or URL. Each count is one increment: no await, nothing to fail.
 */
export const workerMetricsRegistry = new Registry();

/**
 * What became of one mail job run (MailProcessor): `sent` (handed to SMTP, or logged without
 * SMTP_URL outside production), `retried` (an attempt failed, another is scheduled), `given_up`
 * (out of attempts, refused 5yz, never renderable), `withdrawn` (its outbox row gone or settled:
 * its recipient erased, or sent already), `expired` (its link or code ran out before it could go).
 */
export type MailOutcome = 'sent' | 'retried' | 'given_up' | 'withdrawn' | 'expired';
const MAIL_OUTCOMES: readonly MailOutcome[] = ['sent', 'retried', 'given_up', 'withdrawn', 'expired'];

/** One mail job run's outcome. */
export const countMail = outcomeCounter('authp_mail_total', 'Mail job outcomes of this worker process (sent, retried, given_up, withdrawn, expired)', MAIL_OUTCOMES, workerMetricsRegistry);

/**
 * What became of one webhook delivery attempt (WebhookDeliveryWorker): `delivered` (2xx),
 * `retried` (the attempt failed, the delivery has attempts left), `failed` (the delivery gave up:
 * its last attempt failed, or it was given up otherwise), `endpoint_disabled` (dropped: its
 * endpoint is disabled).
 */
export type WebhookDeliveryOutcome = 'delivered' | 'retried' | 'failed' | 'endpoint_disabled';
const WEBHOOK_OUTCOMES: readonly WebhookDeliveryOutcome[] = ['delivered', 'retried', 'failed', 'endpoint_disabled'];

/** One webhook delivery attempt's outcome. */
export const countWebhookDelivery = outcomeCounter(
  'authp_webhook_deliveries_total',
  'Webhook delivery attempt outcomes of this worker process (delivered, retried, failed, endpoint_disabled)',
  WEBHOOK_OUTCOMES,
  workerMetricsRegistry,
);
