import { Command } from '@nestjs/cqrs';
import { UserPrincipal } from '../../../shared/auth/auth-context';

/** Ends the bearer's session: its refresh tokens stop working, its access tokens are refused. */
export class LogoutCommand extends Command<void> {
  constructor(readonly user: UserPrincipal) {
    super();
  }
}
