import { Command } from '@nestjs/cqrs';
import { ClientInfoValue, UserPrincipal } from '../../../shared/auth/auth-context';

/** Removes the TOTP factor and the recovery codes (step-up, password and a code required). */
export class DisableMfaCommand extends Command<void> {
  constructor(
    readonly user: UserPrincipal,
    readonly code: string,
    readonly password: string,
    readonly client: ClientInfoValue,
  ) {
    super();
  }
}
