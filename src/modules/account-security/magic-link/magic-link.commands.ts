import { Command } from '@nestjs/cqrs';
import { ApiKeyPrincipal, ClientInfoValue } from '../../../shared/auth/auth-context';
import { AcceptedResponse } from '../account-security.constants';
import { PasswordlessResponse } from '../passwordless-sign-in.service';
import { UserMagicLinkRequestDto } from './magic-link.request.dto';

/** Mails a sign-in link to the address if it has an account (202 either way). */
export class RequestMagicLinkCommand extends Command<AcceptedResponse> {
  constructor(
    readonly apiKey: ApiKeyPrincipal,
    readonly body: UserMagicLinkRequestDto,
    readonly client: ClientInfoValue,
  ) {
    super();
  }
}

/** Signs in with a magic link (token response, or an MFA challenge). */
export class VerifyMagicLinkCommand extends Command<PasswordlessResponse> {
  constructor(
    readonly apiKey: ApiKeyPrincipal,
    readonly token: string,
    readonly resumeBinding: string | undefined,
  ) {
    super();
  }
}
