import { Command } from '@nestjs/cqrs';
import { ClientInfoValue, UserPrincipal } from '../../../shared/auth/auth-context';
import { RecoveryCodesResponseDto } from '../mfa.response.dto';

/** Replaces the recovery codes (a TOTP code and the password required); the old ones stop working. */
export class RegenerateRecoveryCodesCommand extends Command<RecoveryCodesResponseDto> {
  constructor(
    readonly user: UserPrincipal,
    readonly code: string,
    readonly password: string,
    readonly client: ClientInfoValue,
  ) {
    super();
  }
}
