import { Command } from '@nestjs/cqrs';
import { DashboardPrincipal } from '../../../shared/auth/auth-context';
import { WebhookEndpointResponse } from '../webhook-endpoint.entity';

/** Enables an endpoint that was disabled after repeated failures (owner); idempotent. */
export class EnableWebhookCommand extends Command<WebhookEndpointResponse> {
  constructor(
    readonly actor: DashboardPrincipal,
    readonly endpointId: string,
  ) {
    super();
  }
}
