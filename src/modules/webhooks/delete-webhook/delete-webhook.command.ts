import { Command } from '@nestjs/cqrs';
import { DashboardPrincipal } from '../../../shared/auth/auth-context';

/** Deletes an endpoint (owner) with its delivery log; deliveries still queued are dropped. */
export class DeleteWebhookCommand extends Command<void> {
  constructor(
    readonly actor: DashboardPrincipal,
    readonly endpointId: string,
  ) {
    super();
  }
}
