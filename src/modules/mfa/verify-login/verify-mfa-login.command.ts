import { Command } from '@nestjs/cqrs';
import { ApiKeyPrincipal, ClientInfoValue } from '../../../shared/auth/auth-context';
import { TokenResponse } from '../../sessions/sessions.service';

/** The token response, with the resumed authorization request when the first factor was a passwordless one that had it. */
export type MfaVerifyResponse = TokenResponse & { oauth_params?: Record<string, string> };

/** Second step of an MFA sign-in: the challenge of the password step plus a TOTP or recovery code. */
export class VerifyMfaLoginCommand extends Command<MfaVerifyResponse> {
  constructor(
    readonly apiKey: ApiKeyPrincipal,
    readonly challengeToken: string,
    readonly code: string,
    readonly client: ClientInfoValue,
  ) {
    super();
  }
}
