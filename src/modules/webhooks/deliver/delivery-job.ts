import type { JobsOptions } from 'bullmq';

/** The data of a delivery job: everything else is read from the delivery row when it runs. */
export interface DeliveryJobData {
  deliveryId: string;
  /** the delivery's tenant (WEBHOOK_CONCURRENCY_PER_TENANT); read from the row for a job without it */
  tenantId?: string;
}

/**
 * Job id of a delivery (one outbox event to one endpoint): re-adding it is a no-op. The delivery
 * row's own id, never reused: an outbox id handed out again after PostgreSQL went back in time (a
 * restore, a lagging replica) must not meet the finished job of the old delivery and be dropped.
 */
export function deliveryJobId(deliveryId: string): string {
  return `wh-${deliveryId}`;
}

/** Completed delivery jobs are kept a day and failed ones two weeks (while kept, a re-add of the id is a no-op). */
const KEEP: Pick<JobsOptions, 'removeOnComplete' | 'removeOnFail'> = { removeOnComplete: { age: 24 * 3600 }, removeOnFail: { age: 14 * 24 * 3600 } };

/** A pending delivery as its job is built from it. */
export interface PendingDelivery {
  id: string;
  tenant_id: string | null;
  outbox_id: string;
  endpoint_id: string;
  event_type: string;
}

/**
 * The BullMQ job of a delivery with `attempts` attempts left (the fan-out: WEBHOOK_MAX_ATTEMPTS;
 * the queue reconciler re-adding a lost job: what the delivery row has not used yet, delayed
 * until its scheduled next attempt). The row keeps the count: the job's own attempts only bound
 * how often it runs (DeliverWebhookHandler numbers the attempts and ends the delivery).
 */
export function deliveryJob(d: PendingDelivery, attempts: number, delayMs = 0): { tenantId: string | null; name: string; data: DeliveryJobData; opts: JobsOptions & { jobId: string } } {
  return {
    tenantId: d.tenant_id,
    name: d.event_type,
    data: { deliveryId: d.id, ...(d.tenant_id ? { tenantId: d.tenant_id } : {}) },
    opts: {
      ...KEEP,
      jobId: deliveryJobId(d.id),
      attempts: Math.max(1, attempts),
      backoff: { type: 'webhook' },
      ...(delayMs > 0 ? { delay: delayMs } : {}),
    },
  };
}
