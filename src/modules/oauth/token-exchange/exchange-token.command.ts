import { Command } from '@nestjs/cqrs';
import { ClientInfoValue } from '../../../shared/auth/auth-context';
import { FormParams } from '../oauth-form';

/** RFC 8693 section 2.2.1 successful response (spec 4.3): no refresh_token, no id_token. */
export interface TokenExchangeResponse {
  access_token: string;
  issued_token_type: string;
  token_type: 'Bearer';
  expires_in: number;
  scope: string;
}

/** POST /oauth/token with the token-exchange grant (spec 4.3, 7.5): a user token becomes an agent token. */
export class ExchangeTokenCommand extends Command<TokenExchangeResponse> {
  constructor(
    readonly form: FormParams,
    /** the Authorization header as sent (HTTP Basic client authentication) */
    readonly authorization: string | undefined,
    readonly client: ClientInfoValue,
  ) {
    super();
  }
}
