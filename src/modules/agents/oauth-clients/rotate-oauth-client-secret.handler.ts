import { CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import { randomToken, sha256Hex } from '../../../shared/crypto/tokens';
import { Db } from '../../../shared/db/db.service';
import { AppError } from '../../../shared/errors/app-error';
import { EventsService } from '../../../shared/events/events.service';
import { findTenantOAuthClient } from './oauth-client.errors';
import { ClientRow, CreatedOAuthClientResponse, OAUTH_CLIENT_COLUMNS, toOAuthClientResponse } from './oauth-clients.dto';
import { RotateOAuthClientSecretCommand } from './rotate-oauth-client-secret.command';

/**
 * One conditional update (not revoked, confidential) replaces the stored SHA-256; client
 * authentication reads it uncached on every request, so the old secret is refused from the commit
 * on. 409 oauth_client/already_revoked after revocation, 409 oauth_client/not_confidential for a
 * public client (RFC 6749 section 2.1: it has no secret to rotate).
 */
@CommandHandler(RotateOAuthClientSecretCommand)
export class RotateOAuthClientSecretHandler implements ICommandHandler<RotateOAuthClientSecretCommand> {
  constructor(
    private readonly db: Db,
    private readonly events: EventsService,
  ) {}

  async execute(cmd: RotateOAuthClientSecretCommand): Promise<CreatedOAuthClientResponse> {
    const tenantId = cmd.actor.tenant!.id;
    const secret = randomToken();
    return this.db.tx(async (tx) => {
      const [row] = await tx.query<ClientRow>(
        `UPDATE oauth_clients SET secret_hash = $3
          WHERE id = $1 AND tenant_id = $2 AND revoked_at IS NULL AND client_type = 'confidential'
          RETURNING ${OAUTH_CLIENT_COLUMNS}`,
        [cmd.clientId, tenantId, sha256Hex(secret)],
      );
      if (!row) {
        const current = await findTenantOAuthClient(tx, tenantId, cmd.clientId);
        if (current.revoked_at) throw new AppError('oauth_client/already_revoked', 'The OAuth client was revoked; revocation is final');
        if (current.client_type !== 'confidential') throw new AppError('oauth_client/not_confidential', 'Public clients authenticate without a secret; there is none to rotate');
        throw new AppError('server/error', 'conditional oauth client update matched nothing');
      }
      await this.events.audit(tx, {
        tenantId,
        type: 'oauth_client.secret_rotated',
        actorType: 'dashboard_user',
        actorId: cmd.actor.userId,
        targetType: 'oauth_client',
        targetId: row.id,
        severity: 'medium',
        metadata: { client_type: row.client_type },
      });
      return { ...toOAuthClientResponse(row), client_secret: secret };
    });
  }
}
