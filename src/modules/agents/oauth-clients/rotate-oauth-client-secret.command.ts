import { Command } from '@nestjs/cqrs';
import { DashboardPrincipal } from '../../../shared/auth/auth-context';
import { CreatedOAuthClientResponse } from './oauth-clients.dto';

/** A new client_secret for a confidential legacy client, revealed once; the old one stops working at once. */
export class RotateOAuthClientSecretCommand extends Command<CreatedOAuthClientResponse> {
  constructor(
    readonly actor: DashboardPrincipal,
    readonly clientId: string,
  ) {
    super();
  }
}
