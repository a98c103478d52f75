import { Command } from '@nestjs/cqrs';
import { DashboardPrincipal } from '../../../../shared/auth/auth-context';

/** Erase an end user (GDPR Art. 17) of the actor's tenant: owner only, after a recent sign-in. */
export class DeleteUserCommand extends Command<void> {
  constructor(
    readonly actor: DashboardPrincipal,
    readonly userId: string,
  ) {
    super();
  }
}
