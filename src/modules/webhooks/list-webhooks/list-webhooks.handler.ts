import { IQueryHandler, QueryHandler } from '@nestjs/cqrs';
import { Db } from '../../../shared/db/db.service';
import { keysetPosition, Page, toPage } from '../../../shared/db/pagination';
import { ENDPOINT_COLUMNS, toEndpointResponse, WebhookEndpointResponse, WebhookEndpointRow } from '../webhook-endpoint.entity';
import { ListWebhooksQuery } from './list-webhooks.query';

@QueryHandler(ListWebhooksQuery)
export class ListWebhooksHandler implements IQueryHandler<ListWebhooksQuery> {
  constructor(private readonly db: Db) {}

  async execute(q: ListWebhooksQuery): Promise<Page<WebhookEndpointResponse>> {
    const list = `webhooks:${q.tenantId}`;
    const pos = keysetPosition(q.cursor, list);
    const rows = await this.db.query<WebhookEndpointRow & { created_at_text: string }>(
      `SELECT ${ENDPOINT_COLUMNS}, created_at::text AS created_at_text FROM webhook_endpoints
        WHERE tenant_id = $1 AND ($2::timestamptz IS NULL OR (created_at, id) < ($2::timestamptz, $3::uuid))
        ORDER BY created_at DESC, id DESC LIMIT $4`,
      [q.tenantId, pos?.[0] ?? null, pos?.[1] ?? null, q.limit + 1],
    );
    return toPage(rows, q.limit, toEndpointResponse, (r) => [r.created_at_text, r.id], list);
  }
}
