import { Command } from '@nestjs/cqrs';
import { ClientInfoValue, DashboardPrincipal } from '../../../shared/auth/auth-context';

/** Ends the caller's dashboard session server-side. */
export class DashboardLogoutCommand extends Command<void> {
  constructor(
    readonly session: DashboardPrincipal,
    readonly client: ClientInfoValue,
  ) {
    super();
  }
}
