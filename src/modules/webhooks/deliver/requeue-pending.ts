import { InjectQueue } from '@nestjs/bullmq';
import { Inject, Injectable, OnModuleInit } from '@nestjs/common';
import { Queue } from 'bullmq';
import { APP_CONFIG, AppConfig } from '../../../config/config';
import { Db } from '../../../shared/db/db.service';
import { FairShare } from '../../../shared/outbox/fair-share';
import { QueueReconciler } from '../../../shared/outbox/queue-reconciler';
import { WEBHOOK_DELIVERY_QUEUE } from '../webhook-events';
import { deliveryJob, DeliveryJobData, PendingDelivery } from './delivery-job';

const BATCH = 500;

/**
 * The queue reconciler's step for webhooks: every delivery still pending (created at least the
 * grace period ago) gets its job re-added under its fixed id. A job Redis still holds (waiting,
 * delayed for its next retry, running) is left alone; one Redis lost resumes where the delivery
 * row is (the attempts it has not used, its next attempt time; the handler numbers the attempts
 * and schedules the retries from the row), with the same webhook-id and body.
 */
@Injectable()
export class RequeuePendingDeliveries implements OnModuleInit {
  constructor(
    private readonly reconciler: QueueReconciler,
    private readonly db: Db,
    @InjectQueue(WEBHOOK_DELIVERY_QUEUE) private readonly deliveries: Queue<DeliveryJobData>,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly fairShare: FairShare,
  ) {}

  onModuleInit(): void {
    this.reconciler.register({ name: 'webhook-deliveries', run: (grace) => this.run(grace) });
  }

  async run(graceSeconds: number): Promise<number> {
    let after = '00000000-0000-0000-0000-000000000000';
    let total = 0;
    for (;;) {
      const rows = await this.db.query<PendingDelivery & { attempts: number; delay_ms: number }>(
        `SELECT id, tenant_id, outbox_id::text AS outbox_id, endpoint_id, event_type, attempts,
                GREATEST(0, floor(extract(epoch FROM next_attempt_at - now()) * 1000))::int AS delay_ms
           FROM webhook_deliveries
          WHERE status = 'pending' AND id > $1 AND created_at <= now() - make_interval(secs => $2)
          ORDER BY id LIMIT $3`,
        [after, graceSeconds, BATCH],
      );
      if (!rows.length) return total;
      // resumed where the row is: the attempts it has left, and its next attempt when it had one scheduled
      // only the jobs Redis lost are added, and take a turn (FairShare)
      await this.fairShare.addBulk(this.deliveries, rows.map((r) => deliveryJob(r, this.config.WEBHOOK_MAX_ATTEMPTS - r.attempts, r.delay_ms ?? 0)));
      total += rows.length;
      after = rows[rows.length - 1].id;
    }
  }
}
