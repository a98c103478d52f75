import { Command } from '@nestjs/cqrs';
import { ClientInfoValue } from '../../../shared/auth/auth-context';
import { FormParams } from '../oauth-form';

/** POST /oauth/revoke (RFC 7009): access tokens by jti until they expire, refresh tokens end their session. */
export class RevokeTokenCommand extends Command<void> {
  constructor(
    readonly form: FormParams,
    readonly authorization: string | undefined,
    readonly apiKey: string | undefined,
    readonly client: ClientInfoValue,
  ) {
    super();
  }
}
