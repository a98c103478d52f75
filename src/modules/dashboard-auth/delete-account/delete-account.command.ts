import { Command } from '@nestjs/cqrs';
import { ClientInfoValue, DashboardPrincipal } from '../../../shared/auth/auth-context';

/** Erases the caller's own dashboard account (GDPR Art. 17): DELETE /v1/auth/dashboard/me. */
export class DeleteDashboardAccountCommand extends Command<void> {
  constructor(
    readonly session: DashboardPrincipal,
    readonly client: ClientInfoValue,
  ) {
    super();
  }
}
