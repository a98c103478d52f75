import { Query } from '@nestjs/cqrs';
import { Page } from '../../../shared/db/pagination';
import { WebhookEndpointResponse } from '../webhook-endpoint.entity';

/** A tenant's webhook endpoints, newest first (never with their secrets). */
export class ListWebhooksQuery extends Query<Page<WebhookEndpointResponse>> {
  constructor(
    readonly tenantId: string,
    readonly limit: number,
    readonly cursor?: string,
  ) {
    super();
  }
}
