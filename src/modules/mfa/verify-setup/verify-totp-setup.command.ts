import { Command } from '@nestjs/cqrs';
import { ClientInfoValue, UserPrincipal } from '../../../shared/auth/auth-context';
import { RecoveryCodesResponseDto } from '../mfa.response.dto';

/** Completes TOTP enrollment with a code of the new seed; answers the 10 recovery codes. */
export class VerifyTotpSetupCommand extends Command<RecoveryCodesResponseDto> {
  constructor(
    readonly user: UserPrincipal,
    readonly code: string,
    readonly client: ClientInfoValue,
  ) {
    super();
  }
}
