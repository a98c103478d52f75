import { IQueryHandler, QueryHandler } from '@nestjs/cqrs';
import { Db } from '../../../shared/db/db.service';
import { AppError } from '../../../shared/errors/app-error';
import { ENDPOINT_COLUMNS, toEndpointResponse, WebhookEndpointResponse, WebhookEndpointRow } from '../webhook-endpoint.entity';
import { GetWebhookQuery } from './get-webhook.query';

@QueryHandler(GetWebhookQuery)
export class GetWebhookHandler implements IQueryHandler<GetWebhookQuery> {
  constructor(private readonly db: Db) {}

  async execute(q: GetWebhookQuery): Promise<WebhookEndpointResponse> {
    const [row] = await this.db.query<WebhookEndpointRow>(`SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE id = $1 AND tenant_id = $2`, [q.endpointId, q.tenantId]);
    if (!row) throw new AppError('webhook/not_found');
    return toEndpointResponse(row);
  }
}
