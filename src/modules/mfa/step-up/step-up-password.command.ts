import { Command } from '@nestjs/cqrs';
import { ClientInfoValue, UserPrincipal } from '../../../shared/auth/auth-context';
import { StepUpResponseDto } from '../mfa.response.dto';

/** spec 2.5: re-verification of the bearer's user by password. */
export class StepUpPasswordCommand extends Command<StepUpResponseDto> {
  constructor(
    readonly user: UserPrincipal,
    readonly password: string,
    readonly client: ClientInfoValue,
  ) {
    super();
  }
}
