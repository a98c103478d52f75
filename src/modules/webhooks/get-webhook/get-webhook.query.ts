import { Query } from '@nestjs/cqrs';
import { WebhookEndpointResponse } from '../webhook-endpoint.entity';

/** One endpoint of the tenant; another tenant's id is 404 like an unknown one. */
export class GetWebhookQuery extends Query<WebhookEndpointResponse> {
  constructor(
    readonly tenantId: string,
    readonly endpointId: string,
  ) {
    super();
  }
}
