import { Command } from '@nestjs/cqrs';
import { DashboardPrincipal } from '../../../shared/auth/auth-context';
import { RotatedWebhookSecretResponse } from '../webhook-endpoint.entity';

/** A new signing secret for an endpoint (owner); the replaced one keeps signing for previousTtlSeconds. */
export class RotateWebhookSecretCommand extends Command<RotatedWebhookSecretResponse> {
  constructor(
    readonly actor: DashboardPrincipal,
    readonly endpointId: string,
    readonly previousTtlSeconds: number,
  ) {
    super();
  }
}
