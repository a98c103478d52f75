import { Inject, Logger } from '@nestjs/common';
import { CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import { APP_CONFIG, AppConfig } from '../../../config/config';
import { EnvelopeCipher } from '../../../shared/crypto/envelope-cipher';
import { Db, Queryable } from '../../../shared/db/db.service';
import { EventsService } from '../../../shared/events/events.service';
import { MailService } from '../../../shared/mail/mail.service';
import { retryDelayMs } from '../backoff';
import { webhookHeaders } from '../signature';
import { displayUrl, redactedUrl, urlPolicyFor } from '../url-policy';
import { openWebhookSecret } from '../webhook-secret';
import { DeliverWebhookCommand, DeliverWebhookResult, WebhookAttemptFailed } from './deliver-webhook.command';
import { postWebhook } from './http-sender';

interface DeliveryRow {
  id: string;
  tenant_id: string;
  endpoint_id: string;
  message_id: string;
  body: string;
  status: 'pending' | 'delivered' | 'failed';
  url: string;
  secret_enc: string;
  /** a replaced secret still in its overlap (null once it expired) */
  previous_secret_enc: string | null;
  disabled_at: Date | null;
  /** attempts made so far (by whichever job) */
  attempts: number;
}

/** Margin past the attempt timeout before a lease runs out on its own (a worker that died sending). */
const LEASE_MARGIN_MS = 5000;
/** How long after a held lease runs out a waiting job looks again. */
const LEASE_RECHECK_MS = 250;
/**
 * How early a job may take the lease before the row's next attempt: BullMQ schedules by the
 * worker's clock, the row by the database's.
 */
const DUE_SLACK_MS = 1000;

/** The lease of one attempt: it cannot still be running once the timeout and the margin have passed. */
export function leaseMs(timeoutMs: number): number {
  return timeoutMs + LEASE_MARGIN_MS;
}

/**
 * Sends one attempt of a delivery, signed per Standard Webhooks, and records it in the delivery
 * log. A delivery that used up its attempts counts against its endpoint; after
 * WEBHOOK_DISABLE_AFTER_FAILED_DELIVERIES such deliveries in a row (no success in between) the
 * endpoint is disabled, with an audit event and an email to every owner of the tenant.
 */
@CommandHandler(DeliverWebhookCommand)
export class DeliverWebhookHandler implements ICommandHandler<DeliverWebhookCommand> {
  private readonly log = new Logger('WebhookDelivery');

  constructor(
    private readonly db: Db,
    private readonly cipher: EnvelopeCipher,
    private readonly events: EventsService,
    private readonly mail: MailService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  async execute(cmd: DeliverWebhookCommand): Promise<DeliverWebhookResult> {
    const maxAttempts = this.config.WEBHOOK_MAX_ATTEMPTS;
    // read the delivery with its row locked and take the lease in the same statement: of two jobs
    // of one delivery, the second sees the first's lease (FOR UPDATE reads the latest row version).
    // The row says where the delivery is, whichever job runs it: the lease is taken only when its
    // next attempt is due and it has attempts left
    const [d] = await this.db.query<DeliveryRow & { free: boolean; due: boolean; leased: boolean; lease_left_ms: number; due_in_ms: number }>(
      `WITH cur AS (
         SELECT wd.id, wd.tenant_id, wd.endpoint_id, wd.message_id, wd.body, wd.status, wd.attempts, e.url, e.secret_enc, e.disabled_at,
                CASE WHEN e.previous_secret_expires_at > now() THEN e.previous_secret_enc END AS previous_secret_enc,
                (wd.sending_until IS NULL OR wd.sending_until <= now()) AS free,
                (wd.next_attempt_at IS NULL OR wd.next_attempt_at <= now() + make_interval(secs => $4::double precision / 1000)) AS due,
                GREATEST(0, ceil(extract(epoch FROM wd.sending_until - now()) * 1000))::int AS lease_left_ms,
                GREATEST(0, ceil(extract(epoch FROM wd.next_attempt_at - now()) * 1000))::int AS due_in_ms
           FROM webhook_deliveries wd JOIN webhook_endpoints e ON e.id = wd.endpoint_id WHERE wd.id = $1 FOR UPDATE OF wd
       ), lease AS (
         UPDATE webhook_deliveries w SET sending_until = now() + make_interval(secs => $2::double precision / 1000)
           FROM cur WHERE w.id = cur.id AND cur.status = 'pending' AND cur.free AND cur.due AND cur.disabled_at IS NULL AND cur.attempts < $3
         RETURNING w.id
       )
       SELECT cur.*, EXISTS (SELECT 1 FROM lease) AS leased FROM cur`,
      [cmd.deliveryId, leaseMs(this.config.WEBHOOK_TIMEOUT_MS), maxAttempts, DUE_SLACK_MS],
      'webhook_delivery_lease',
    );
    // the endpoint was deleted (its deliveries with it), or a re-run after the outcome was recorded
    if (!d) return { skipped: 'endpoint_deleted' };
    if (d.status !== 'pending') return { skipped: d.status === 'delivered' ? 'already_delivered' : 'already_failed' };
    // another job of this delivery is sending: come back when its lease runs out (by then it has
    // recorded the outcome, or died). Before anything below ends the delivery: that attempt's
    // outcome is the one to record
    if (!d.free) return { in_flight: true, retry_in_ms: d.lease_left_ms + LEASE_RECHECK_MS };
    // a job early for the row's next attempt (a second job of the delivery, after the other one's
    // failed attempt): it waits for the backoff like the row says
    if (!d.due) return { not_due: true, retry_in_ms: d.due_in_ms };
    if (d.disabled_at) {
      // unless another job took the lease since (the endpoint enabled again in between)
      await this.db.query(
        `UPDATE webhook_deliveries SET status = 'failed', failed_at = now(), next_attempt_at = NULL, last_error = 'endpoint disabled'
          WHERE id = $1 AND status = 'pending' AND (sending_until IS NULL OR sending_until <= now())`,
        [d.id],
      );
      return { skipped: 'endpoint_disabled' };
    }
    // due, free and enabled, yet not leased: the row used every attempt (WEBHOOK_MAX_ATTEMPTS was
    // lowered since): it failed, and counts against its endpoint like any delivery that did
    if (!d.leased) {
      await this.db.tx(async (tx) => {
        await lockEndpoint(tx, d.endpoint_id);
        const [failed] = await tx.query(
          `UPDATE webhook_deliveries SET status = 'failed', failed_at = now(), next_attempt_at = NULL
            WHERE id = $1 AND status = 'pending' AND (sending_until IS NULL OR sending_until <= now()) RETURNING id`,
          [d.id],
        );
        if (failed) await this.countFailedDelivery(tx, d);
      });
      return { skipped: 'attempts_used' };
    }

    // the current secret, and one a rotation replaced while its overlap lasts (signed with both)
    const secrets = [d.secret_enc, d.previous_secret_enc].filter((s): s is string => Boolean(s)).map((enc) => openWebhookSecret(this.cipher, d.endpoint_id, enc));
    const result = await postWebhook(d.url, d.body, webhookHeaders(secrets, d.message_id, d.body), {
      timeoutMs: this.config.WEBHOOK_TIMEOUT_MS,
      policy: urlPolicyFor(this.config),
    });

    if (result.ok) {
      await this.db.tx(async (tx) => {
        await lockEndpoint(tx, d.endpoint_id);
        await tx.query(
          `UPDATE webhook_deliveries SET status = 'delivered', attempts = attempts + 1, last_status_code = $2, last_error = NULL,
                  last_attempt_at = now(), next_attempt_at = NULL, delivered_at = now(), sending_until = NULL
            WHERE id = $1 AND status = 'pending'`,
          [d.id, result.statusCode],
        );
        await tx.query(`UPDATE webhook_endpoints SET consecutive_failed_deliveries = 0, last_success_at = now() WHERE id = $1`, [d.endpoint_id]);
      });
      return { delivered: true, status_code: result.statusCode! };
    }

    // numbered by the row (the lease keeps anyone else from counting meanwhile): the last attempt
    // and the retry step are the delivery's, not those of the job that happens to run it
    const attempt = d.attempts + 1;
    const retryInMs = attempt >= maxAttempts ? null : retryDelayMs(attempt, this.config.WEBHOOK_BACKOFF_BASE_MS);
    const error = result.error ?? 'request failed';
    await this.db.tx(async (tx) => {
      await lockEndpoint(tx, d.endpoint_id);
      const [failed] = await tx.query<{ status: string }>(
        `UPDATE webhook_deliveries SET attempts = attempts + 1, last_status_code = $2, last_error = $3, last_attempt_at = now(),
                status = CASE WHEN $4 THEN 'failed' ELSE 'pending' END,
                failed_at = CASE WHEN $4 THEN now() END,
                next_attempt_at = CASE WHEN $4 THEN NULL ELSE now() + make_interval(secs => $5::double precision / 1000) END,
                sending_until = NULL
          WHERE id = $1 AND status = 'pending' RETURNING status`,
        [d.id, result.statusCode, error, retryInMs === null, retryInMs],
      );
      if (failed?.status === 'failed') await this.countFailedDelivery(tx, d);
    });
    throw new WebhookAttemptFailed(error, attempt, retryInMs);
  }

  /** A delivery gave up: one more against the endpoint, which is disabled at the threshold. */
  private async countFailedDelivery(tx: Queryable, d: DeliveryRow): Promise<void> {
    const [counted] = await tx.query<{ url: string; consecutive_failed_deliveries: number; just_disabled: boolean }>(
      `WITH before AS (SELECT id, disabled_at FROM webhook_endpoints WHERE id = $1 FOR UPDATE)
       UPDATE webhook_endpoints e
          SET consecutive_failed_deliveries = e.consecutive_failed_deliveries + 1,
              disabled_at = CASE WHEN e.disabled_at IS NULL AND e.consecutive_failed_deliveries + 1 >= $2 THEN now() ELSE e.disabled_at END,
              disabled_reason = CASE WHEN e.disabled_at IS NULL AND e.consecutive_failed_deliveries + 1 >= $2 THEN 'repeated_failures' ELSE e.disabled_reason END
         FROM before WHERE e.id = before.id
        RETURNING e.url, e.consecutive_failed_deliveries, (before.disabled_at IS NULL AND e.disabled_at IS NOT NULL) AS just_disabled`,
      [d.endpoint_id, this.config.WEBHOOK_DISABLE_AFTER_FAILED_DELIVERIES],
    );
    if (!counted?.just_disabled) return;
    await this.events.audit(tx, {
      tenantId: d.tenant_id,
      type: 'webhook.disabled',
      severity: 'medium',
      actorType: 'system',
      targetType: 'webhook_endpoint',
      targetId: d.endpoint_id,
      metadata: { url: redactedUrl(counted.url), reason: 'repeated_failures', consecutive_failed_deliveries: counted.consecutive_failed_deliveries },
    });
    const owners = await tx.query<{ email: string }>(
      `SELECT u.email FROM tenant_members m JOIN dashboard_users u ON u.id = m.user_id WHERE m.tenant_id = $1 AND m.role = 'owner' ORDER BY u.email`,
      [d.tenant_id],
    );
    // the owners, who see the endpoint's URL whole anyway: with its path, which tells their endpoints apart
    for (const o of owners) await this.mail.enqueue(tx, { tenantId: d.tenant_id, to: o.email, template: 'webhook_disabled', data: { url: displayUrl(counted.url) }, notice: true });
    this.log.warn(`webhook endpoint ${d.endpoint_id} of tenant ${d.tenant_id} disabled after ${counted.consecutive_failed_deliveries} failed deliveries`);
  }
}

/**
 * An attempt's outcome changes the delivery row and then its endpoint's counters: the endpoint row
 * is locked first, as DELETE .../webhooks/{id} takes it (it removes the endpoint, then its
 * deliveries by cascade). In the other order the two deadlocked and PostgreSQL aborted one (the
 * owner's DELETE answered 503). A deleted endpoint leaves nothing to lock or update.
 */
async function lockEndpoint(tx: Queryable, endpointId: string): Promise<void> {
  await tx.query(`SELECT 1 FROM webhook_endpoints WHERE id = $1 FOR NO KEY UPDATE`, [endpointId]);
}
