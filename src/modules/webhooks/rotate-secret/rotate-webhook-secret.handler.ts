import { CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import { EnvelopeCipher } from '../../../shared/crypto/envelope-cipher';
import { Db } from '../../../shared/db/db.service';
import { AppError } from '../../../shared/errors/app-error';
import { EventsService } from '../../../shared/events/events.service';
import { generateWebhookSecret } from '../signature';
import { ENDPOINT_COLUMNS, RotatedWebhookSecretResponse, toEndpointResponse, WebhookEndpointRow } from '../webhook-endpoint.entity';
import { secretAad } from '../webhook-secret';
import { RotateWebhookSecretCommand } from './rotate-webhook-secret.command';

/**
 * One statement swaps the secrets (the row lock orders parallel rotations: each one's secret
 * becomes the next one's previous), with its audit row in the transaction. The replaced secret
 * signs beside the new one until previous_secret_expires_at (0 s: not at all); a secret replaced
 * earlier stops at once, so at most two sign. The hourly maintenance sweep clears an expired one.
 */
@CommandHandler(RotateWebhookSecretCommand)
export class RotateWebhookSecretHandler implements ICommandHandler<RotateWebhookSecretCommand> {
  constructor(
    private readonly db: Db,
    private readonly events: EventsService,
    private readonly cipher: EnvelopeCipher,
  ) {}

  async execute(cmd: RotateWebhookSecretCommand): Promise<RotatedWebhookSecretResponse> {
    const tenantId = cmd.actor.tenant!.id;
    const secret = generateWebhookSecret();
    return this.db.tx(async (tx) => {
      const [row] = await tx.query<WebhookEndpointRow & { previous_secret_expires_at: Date | null }>(
        `UPDATE webhook_endpoints
            SET secret_enc = $3,
                previous_secret_enc = CASE WHEN $4::int > 0 THEN secret_enc END,
                previous_secret_expires_at = CASE WHEN $4::int > 0 THEN now() + make_interval(secs => $4::int) END
          WHERE id = $1 AND tenant_id = $2
          RETURNING ${ENDPOINT_COLUMNS}, previous_secret_expires_at`,
        [cmd.endpointId, tenantId, this.cipher.encrypt(secret, secretAad(cmd.endpointId)), cmd.previousTtlSeconds],
      );
      if (!row) throw new AppError('webhook/not_found');
      await this.events.audit(tx, {
        tenantId,
        type: 'webhook.secret_rotated',
        actorType: 'dashboard_user',
        actorId: cmd.actor.userId,
        targetType: 'webhook_endpoint',
        targetId: cmd.endpointId,
        severity: 'medium',
        metadata: { previous_secret_ttl_seconds: cmd.previousTtlSeconds },
      });
      return { ...toEndpointResponse(row), secret, previous_secret_expires_at: row.previous_secret_expires_at?.toISOString() ?? null };
    });
  }
}
