import { Command } from '@nestjs/cqrs';
import { ClientInfoValue, DashboardPrincipal } from '../../../shared/auth/auth-context';

/** An owner invites someone by email with a role; the token is mailed and answered once. */
export class InviteMemberCommand extends Command<{ invite_token: string }> {
  constructor(
    readonly actor: DashboardPrincipal,
    readonly email: string,
    readonly role: 'owner' | 'member',
  ) {
    super();
  }
}

export interface AcceptInviteResult {
  body: import('../dashboard-auth.dto').DashboardSessionResponse;
  sessionToken: string;
}

/** Accepts an invitation: joins an existing account (its password) or creates one. */
export class AcceptInviteCommand extends Command<AcceptInviteResult> {
  constructor(
    readonly token: string,
    readonly password: string,
    readonly client: ClientInfoValue,
  ) {
    super();
  }
}
