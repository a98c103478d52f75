import { Command } from '@nestjs/cqrs';
import { ApiKeyPrincipal, ClientInfoValue } from '../../../shared/auth/auth-context';
import { AcceptedResponse } from '../account-security.constants';
import { PasswordlessResponse } from '../passwordless-sign-in.service';
import { UserEmailOtpRequestDto, UserEmailOtpVerifyRequestDto } from './email-otp.request.dto';

/** Mails a 6-digit sign-in code (202 either way). */
export class RequestEmailOtpCommand extends Command<AcceptedResponse> {
  constructor(
    readonly apiKey: ApiKeyPrincipal,
    readonly body: UserEmailOtpRequestDto,
    readonly client: ClientInfoValue,
  ) {
    super();
  }
}

/** Signs in (or signs up, with login_or_create) with an email code. */
export class VerifyEmailOtpCommand extends Command<PasswordlessResponse> {
  constructor(
    readonly apiKey: ApiKeyPrincipal,
    readonly body: UserEmailOtpVerifyRequestDto,
    readonly client: ClientInfoValue,
  ) {
    super();
  }
}
