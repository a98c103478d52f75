import { InjectQueue } from '@nestjs/bullmq';
import { Inject } from '@nestjs/common';
import { CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import { Queue } from 'bullmq';
import { APP_CONFIG, AppConfig } from '../../../config/config';
import { Db } from '../../../shared/db/db.service';
import { FairShare } from '../../../shared/outbox/fair-share';
import { WEBHOOK_DELIVERY_QUEUE } from '../webhook-events';
import { SETTLE_OUTBOX_SQL, settleOutboxRow } from '../../../shared/outbox/outbox-job';
import { deliveryJob, DeliveryJobData } from '../deliver/delivery-job';
import { FanOutWebhookEventCommand } from './fan-out-event.command';

/**
 * One delivery row and one BullMQ job per matching endpoint: subscribed to the event type (or
 * `*`), with no agent filter or the payload's agent_client_id (spec 6), registered and enabled
 * when the event happened (judged at the event's time, not the fan-out's: an event of the
 * endpoint's last disabled period is not sent even if an owner enabled the endpoint again before
 * its fan-out ran, and one from before that period is; one that happened before an automatic
 * disable still in force gets its row, which its job then ends as `endpoint disabled`, so the
 * delivery log shows it). Idempotent: a re-relayed or retried event finds its
 * rows (unique per (outbox id, endpoint)) and re-adds the jobs of the pending ones under the same
 * job ids. The same statement settles the outbox row: from here on the pending delivery rows are
 * what the queue reconciler re-queues should Redis lose the jobs.
 */
@CommandHandler(FanOutWebhookEventCommand)
export class FanOutWebhookEventHandler implements ICommandHandler<FanOutWebhookEventCommand> {
  constructor(
    private readonly db: Db,
    @InjectQueue(WEBHOOK_DELIVERY_QUEUE) private readonly deliveries: Queue<DeliveryJobData>,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly fairShare: FairShare,
  ) {}

  async execute({ event }: FanOutWebhookEventCommand): Promise<{ deliveries: number }> {
    if (!event.tenantId) {
      await settleOutboxRow(this.db, event.outboxId);
      return { deliveries: 0 };
    }
    const agentClientId = typeof event.payload?.agent_client_id === 'string' ? event.payload.agent_client_id.toLowerCase() : null;
    // Standard Webhooks payload; the same bytes on every attempt
    const body = JSON.stringify({ type: event.eventType, timestamp: event.createdAt, data: event.payload ?? {} });
    const rows = await this.db.query<{ id: string; endpoint_id: string }>(
      `WITH ev AS (
         -- the outbox row's own time (the payload's timestamp is rounded to the millisecond)
         SELECT COALESCE((SELECT created_at FROM outbox WHERE id = $5), $2::timestamptz + interval '1 millisecond') AS at
       ), targets AS (
         SELECT e.id FROM webhook_endpoints e, ev
          WHERE e.tenant_id = $1 AND e.created_at <= ev.at
            AND (e.disabled_at IS NULL OR e.disabled_at > ev.at)
            AND NOT (e.last_disabled_at IS NOT NULL AND ev.at >= e.last_disabled_at AND ev.at < e.enabled_at)
            AND ($3 = ANY (events) OR '*' = ANY (events))
            AND (agent_client_id IS NULL OR agent_client_id::text = $4::text)
       ), settled AS (${SETTLE_OUTBOX_SQL('$5')}
       ), inserted AS (
         INSERT INTO webhook_deliveries (tenant_id, endpoint_id, outbox_id, message_id, event_type, body, next_attempt_at)
         SELECT $1, t.id, $5, 'msg_' || replace(gen_random_uuid()::text, '-', ''), $3, $6, now() FROM targets t
         ON CONFLICT ON CONSTRAINT webhook_deliveries_event_endpoint_key DO NOTHING
         RETURNING id, endpoint_id
       )
       SELECT id, endpoint_id FROM inserted
       UNION ALL
       SELECT id, endpoint_id FROM webhook_deliveries WHERE outbox_id = $5 AND status = 'pending'`,
      [event.tenantId, event.createdAt, event.eventType, agentClientId, event.outboxId, body],
    );
    // a retried fan-out finds its deliveries again: FairShare adds only the jobs Redis does not hold
    await this.fairShare.addBulk(
      this.deliveries,
      rows.map((r) => deliveryJob({ id: r.id, tenant_id: event.tenantId, outbox_id: event.outboxId, endpoint_id: r.endpoint_id, event_type: event.eventType }, this.config.WEBHOOK_MAX_ATTEMPTS)),
    );
    return { deliveries: rows.length };
  }
}
