import { Command } from '@nestjs/cqrs';
import { DashboardPrincipal } from '../../../shared/auth/auth-context';
import { CreatedWebhookEndpointResponse } from '../webhook-endpoint.entity';
import { CreateWebhookRequestDto } from './create-webhook.request.dto';

/** Registers a webhook endpoint (owner); the answer carries the signing secret, shown once. */
export class CreateWebhookCommand extends Command<CreatedWebhookEndpointResponse> {
  constructor(
    readonly actor: DashboardPrincipal,
    readonly body: CreateWebhookRequestDto,
  ) {
    super();
  }
}
