import { Command } from '@nestjs/cqrs';
import { ApiKeyPrincipal, ClientInfoValue, UserPrincipal } from '../../../shared/auth/auth-context';
import { AcceptedResponse } from '../account-security.constants';

/** Mails a reset link to the address if it has an account (202 either way). */
export class ForgotPasswordCommand extends Command<AcceptedResponse> {
  constructor(
    readonly apiKey: ApiKeyPrincipal,
    readonly email: string,
    readonly client: ClientInfoValue,
  ) {
    super();
  }
}

/** Sets a new password with a reset link; ends every session of the user. */
export class ResetPasswordCommand extends Command<void> {
  constructor(
    readonly apiKey: ApiKeyPrincipal,
    readonly token: string,
    readonly password: string,
    readonly client: ClientInfoValue,
  ) {
    super();
  }
}

/** Changes the password of the bearer's user (current password required); ends the other sessions. */
export class ChangePasswordCommand extends Command<void> {
  constructor(
    readonly user: UserPrincipal,
    readonly currentPassword: string,
    readonly newPassword: string,
    readonly client: ClientInfoValue,
  ) {
    super();
  }
}
