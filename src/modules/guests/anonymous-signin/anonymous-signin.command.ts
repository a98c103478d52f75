import { Command } from '@nestjs/cqrs';
import { ApiKeyPrincipal } from '../../../shared/auth/auth-context';
import { AnonymousSigninResponse } from './anonymous-signin.request.dto';

/** spec 2.3, 3.1: creates a guest (opaque UUID, no email, no password) with a session. */
export class AnonymousSigninCommand extends Command<AnonymousSigninResponse> {
  constructor(
    readonly apiKey: ApiKeyPrincipal,
    readonly publicMetadata: Record<string, unknown>,
  ) {
    super();
  }
}
