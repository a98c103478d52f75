import { Command } from '@nestjs/cqrs';
import { ApiKeyPrincipal, ClientInfoValue } from '../../../shared/auth/auth-context';
import { AcceptedResponse } from '../account-security.constants';

/** Uses an email verification link: the address it was sent to becomes verified. */
export class VerifyEmailCommand extends Command<void> {
  constructor(
    readonly apiKey: ApiKeyPrincipal,
    readonly token: string,
  ) {
    super();
  }
}

/** Sends a new verification link to an unverified address (202 whatever the address). */
export class ResendVerificationCommand extends Command<AcceptedResponse> {
  constructor(
    readonly apiKey: ApiKeyPrincipal,
    readonly email: string,
    readonly client: ClientInfoValue,
  ) {
    super();
  }
}
