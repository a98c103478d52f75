import { Query } from '@nestjs/cqrs';
import { Page } from '../../../shared/db/pagination';
import { WebhookDeliveryResponse } from '../webhook-endpoint.entity';
import { DeliveryStatus } from './list-deliveries.request.dto';

/** The delivery log of one endpoint of the tenant, newest first. */
export class ListDeliveriesQuery extends Query<Page<WebhookDeliveryResponse>> {
  constructor(
    readonly tenantId: string,
    readonly endpointId: string,
    readonly limit: number,
    readonly cursor?: string,
    readonly status?: DeliveryStatus,
  ) {
    super();
  }
}
