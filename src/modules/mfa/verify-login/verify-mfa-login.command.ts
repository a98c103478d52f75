import { Command } from '@nestjs/cqrs';
import { ApiKeyPrincipal, ClientInfoValue } from '../../../shared/auth/auth-context';
import { TokenResponse } from '../../sessions/sessions.service';

/** Second step of an MFA sign-in: the challenge of the password step plus a TOTP or recovery code. */
export class VerifyMfaLoginCommand extends Command<TokenResponse> {
  constructor(
    readonly apiKey: ApiKeyPrincipal,
    readonly challengeToken: string,
    readonly code: string,
    readonly client: ClientInfoValue,
  ) {
    super();
  }
}
