import { Command } from '@nestjs/cqrs';
import { ApiKeyPrincipal, ClientInfoValue } from '../../../shared/auth/auth-context';
import { TokenResponse } from '../../sessions/sessions.service';

export interface MfaRequiredResponse {
  mfa_required: true;
  mfa_challenge_token: string;
}

/** Password sign-in of an end user of the API key's tenant. */
export class LoginUserCommand extends Command<TokenResponse | MfaRequiredResponse> {
  constructor(
    readonly apiKey: ApiKeyPrincipal,
    readonly email: string,
    readonly password: string,
    readonly client: ClientInfoValue,
  ) {
    super();
  }
}
