import { IQueryHandler, QueryHandler } from '@nestjs/cqrs';
import { Db } from '../../../shared/db/db.service';
import { keysetPosition, Page, toPage } from '../../../shared/db/pagination';
import { AppError } from '../../../shared/errors/app-error';
import { WebhookDeliveryResponse } from '../webhook-endpoint.entity';
import { ListDeliveriesQuery } from './list-deliveries.query';

interface DeliveryRow {
  id: string;
  message_id: string;
  event_type: string;
  status: 'pending' | 'delivered' | 'failed';
  attempts: number;
  last_status_code: number | null;
  last_error: string | null;
  last_attempt_at: Date | null;
  next_attempt_at: Date | null;
  delivered_at: Date | null;
  failed_at: Date | null;
  created_at: Date;
  created_at_text: string;
}

const iso = (d: Date | null) => (d ? d.toISOString() : null);

const toResponse = (r: DeliveryRow): WebhookDeliveryResponse => ({
  id: r.id,
  webhook_id: r.message_id,
  event_type: r.event_type,
  status: r.status,
  attempts: r.attempts,
  last_status_code: r.last_status_code,
  last_error: r.last_error,
  last_attempt_at: iso(r.last_attempt_at),
  next_attempt_at: r.status === 'pending' ? iso(r.next_attempt_at) : null,
  delivered_at: iso(r.delivered_at),
  failed_at: iso(r.failed_at),
  created_at: r.created_at.toISOString(),
});

@QueryHandler(ListDeliveriesQuery)
export class ListDeliveriesHandler implements IQueryHandler<ListDeliveriesQuery> {
  constructor(private readonly db: Db) {}

  async execute(q: ListDeliveriesQuery): Promise<Page<WebhookDeliveryResponse>> {
    const list = `webhook_deliveries:${q.tenantId}:${q.endpointId}`;
    const pos = keysetPosition(q.cursor, list);
    const [endpoint] = await this.db.query(`SELECT 1 FROM webhook_endpoints WHERE id = $1 AND tenant_id = $2`, [q.endpointId, q.tenantId]);
    if (!endpoint) throw new AppError('webhook/not_found');
    const rows = await this.db.query<DeliveryRow>(
      `SELECT id, message_id, event_type, status, attempts, last_status_code, last_error, last_attempt_at, next_attempt_at,
              delivered_at, failed_at, created_at, created_at::text AS created_at_text
         FROM webhook_deliveries
        WHERE endpoint_id = $1 AND tenant_id = $2 AND ($3::text IS NULL OR status = $3)
          AND ($4::timestamptz IS NULL OR (created_at, id) < ($4::timestamptz, $5::uuid))
        ORDER BY created_at DESC, id DESC LIMIT $6`,
      [q.endpointId, q.tenantId, q.status ?? null, pos?.[0] ?? null, pos?.[1] ?? null, q.limit + 1],
    );
    return toPage(rows, q.limit, toResponse, (r) => [r.created_at_text, r.id], list);
  }
}
