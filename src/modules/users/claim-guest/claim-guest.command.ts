import { Command } from '@nestjs/cqrs';
import { UserPrincipal } from '../../../shared/auth/auth-context';
import { TokenResponse } from '../../sessions/sessions.service';

export interface ClaimCredentials {
  email: string;
  emailNormalized: string;
  /** null for a social claim (no password) */
  passwordHash: string | null;
  dateOfBirthEnc: string | null;
  /** amr of the new credentials: `pwd`, or the social provider's */
  method: string;
  emailVerified?: boolean;
}

/** Turns a guest into a registered user in place (same user id); register and social reuse it. */
export class ClaimGuestCommand extends Command<TokenResponse> {
  constructor(
    readonly tenantId: string,
    readonly guest: UserPrincipal,
    readonly credentials: ClaimCredentials,
  ) {
    super();
  }
}
