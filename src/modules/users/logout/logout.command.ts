import { Command } from '@nestjs/cqrs';
import { UserPrincipal } from '../../../shared/auth/auth-context';
import { LogoutScope } from './logout.request.dto';

/**
 * Ends the bearer's session (`local`), every session of the user (`global`) or every one but the
 * bearer's (`others`): their refresh tokens stop working and their access tokens are refused.
 */
export class LogoutCommand extends Command<void> {
  constructor(
    readonly user: UserPrincipal,
    readonly scope: LogoutScope = 'local',
  ) {
    super();
  }
}
