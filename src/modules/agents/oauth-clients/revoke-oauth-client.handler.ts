import { CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import { Db } from '../../../shared/db/db.service';
import { EventsService } from '../../../shared/events/events.service';
import { findTenantOAuthClient } from './oauth-client.errors';
import { ClientRow, OAUTH_CLIENT_COLUMNS, OAuthClientResponse, toOAuthClientResponse } from './oauth-clients.dto';
import { RevokeOAuthClientCommand } from './revoke-oauth-client.command';

/**
 * One transaction: the conditional update (exactly one winner among racing DELETEs) and the
 * `oauth_client.revoked` audit event. Client authentication (/oauth/token, /oauth/introspect,
 * /oauth/revoke) and the authorization request's redirect_uri check read oauth_clients with
 * `revoked_at IS NULL` on every request, uncached: the client is refused from the commit on.
 */
@CommandHandler(RevokeOAuthClientCommand)
export class RevokeOAuthClientHandler implements ICommandHandler<RevokeOAuthClientCommand> {
  constructor(
    private readonly db: Db,
    private readonly events: EventsService,
  ) {}

  async execute(cmd: RevokeOAuthClientCommand): Promise<OAuthClientResponse> {
    const tenantId = cmd.actor.tenant!.id;
    return this.db.tx(async (tx) => {
      const [won] = await tx.query<ClientRow>(
        `UPDATE oauth_clients SET revoked_at = now()
          WHERE id = $1 AND tenant_id = $2 AND revoked_at IS NULL
          RETURNING ${OAUTH_CLIENT_COLUMNS}`,
        [cmd.clientId, tenantId],
      );
      // a repeat (or a racing loser): 200 with the existing revoked_at, no second event
      if (!won) return toOAuthClientResponse(await findTenantOAuthClient(tx, tenantId, cmd.clientId));
      // sign-ins already under way for this client (a magic link or an email code mailed with its
      // authorization request, an MFA challenge after one) would hand its redirect_uri back once
      // completed: they end with it (the user asks again, without the revoked client)
      const params = [tenantId, won.id];
      const live = `tenant_id = $1 AND oauth_params->>'client_id' = $2 AND expires_at > now()`;
      await tx.query(`UPDATE account_tokens SET used_at = now() WHERE ${live} AND used_at IS NULL`, params);
      await tx.query(`UPDATE email_otp_codes SET consumed_at = now() WHERE ${live} AND consumed_at IS NULL`, params);
      await tx.query(`UPDATE mfa_challenges SET used_at = now() WHERE ${live} AND used_at IS NULL`, params);
      await this.events.audit(tx, {
        tenantId,
        type: 'oauth_client.revoked',
        actorType: 'dashboard_user',
        actorId: cmd.actor.userId,
        targetType: 'oauth_client',
        targetId: won.id,
        severity: 'high',
        metadata: { client_type: won.client_type, name: won.name, revoked_at: won.revoked_at!.toISOString() },
      });
      return toOAuthClientResponse(won);
    });
  }
}
