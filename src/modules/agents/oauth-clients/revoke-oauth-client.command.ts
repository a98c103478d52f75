import { Command } from '@nestjs/cqrs';
import { DashboardPrincipal } from '../../../shared/auth/auth-context';
import { OAuthClientResponse } from './oauth-clients.dto';

/** Revoke a legacy OAuth client (final); a repeat answers the first revoked_at. */
export class RevokeOAuthClientCommand extends Command<OAuthClientResponse> {
  constructor(
    readonly actor: DashboardPrincipal,
    readonly clientId: string,
  ) {
    super();
  }
}
