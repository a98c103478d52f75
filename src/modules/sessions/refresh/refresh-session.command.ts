import { Command } from '@nestjs/cqrs';
import { TokenResponse } from '../sessions.service';

/** Rotates a refresh token of the API key's tenant (contract "Tokens"). */
export class RefreshSessionCommand extends Command<TokenResponse> {
  constructor(
    readonly tenantId: string,
    readonly refreshToken: string,
  ) {
    super();
  }
}
