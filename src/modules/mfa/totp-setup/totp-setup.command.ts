import { Command } from '@nestjs/cqrs';
import { UserPrincipal } from '../../../shared/auth/auth-context';
import { TotpSetupResponseDto } from '../mfa.response.dto';

/** Starts TOTP enrollment: a new pending seed (replacing a pending one), shown once. */
export class TotpSetupCommand extends Command<TotpSetupResponseDto> {
  constructor(readonly user: UserPrincipal) {
    super();
  }
}
