import { Command } from '@nestjs/cqrs';
import { ApiKeyPrincipal, ClientInfoValue, UserPrincipal } from '../../../shared/auth/auth-context';
import { TokenResponse } from '../../sessions/sessions.service';
import { RegisterRequestDto } from './register.request.dto';

/** Registers an end user; with a guest's bearer it claims that guest instead (ClaimGuest). */
export class RegisterUserCommand extends Command<TokenResponse> {
  constructor(
    readonly apiKey: ApiKeyPrincipal,
    readonly body: RegisterRequestDto,
    readonly bearer: UserPrincipal | undefined,
    readonly client: ClientInfoValue,
  ) {
    super();
  }

  /** register resolves its tenant from X-API-Key (contract "Tenant resolution") */
  get tenantId(): string {
    return this.apiKey.tenantId;
  }
}
