import { CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import { Db } from '../../../shared/db/db.service';
import { AppError } from '../../../shared/errors/app-error';
import { EventsService } from '../../../shared/events/events.service';
import { ENDPOINT_COLUMNS, toEndpointResponse, WebhookEndpointResponse, WebhookEndpointRow } from '../webhook-endpoint.entity';
import { redactedUrl } from '../url-policy';
import { EnableWebhookCommand } from './enable-webhook.command';

/**
 * Conditional on disabled_at IS NOT NULL: enabling an enabled endpoint changes nothing, no event.
 * The disabled period it ends is recorded (`last_disabled_at` to `enabled_at`): the fan-out sends
 * the endpoint no event of that period, even one whose fan-out runs only now.
 */
@CommandHandler(EnableWebhookCommand)
export class EnableWebhookHandler implements ICommandHandler<EnableWebhookCommand> {
  constructor(
    private readonly db: Db,
    private readonly events: EventsService,
  ) {}

  async execute(cmd: EnableWebhookCommand): Promise<WebhookEndpointResponse> {
    const tenantId = cmd.actor.tenant!.id;
    return this.db.tx(async (tx) => {
      const [enabled] = await tx.query<WebhookEndpointRow>(
        `UPDATE webhook_endpoints SET last_disabled_at = disabled_at, enabled_at = now(), disabled_at = NULL, disabled_reason = NULL, consecutive_failed_deliveries = 0
          WHERE id = $1 AND tenant_id = $2 AND disabled_at IS NOT NULL RETURNING ${ENDPOINT_COLUMNS}`,
        [cmd.endpointId, tenantId],
      );
      if (enabled) {
        await this.events.audit(tx, {
          tenantId,
          type: 'webhook.enabled',
          actorType: 'dashboard_user',
          actorId: cmd.actor.userId,
          targetType: 'webhook_endpoint',
          targetId: cmd.endpointId,
          metadata: { url: redactedUrl(enabled.url) },
        });
        return toEndpointResponse(enabled);
      }
      const [row] = await tx.query<WebhookEndpointRow>(`SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE id = $1 AND tenant_id = $2`, [cmd.endpointId, tenantId]);
      if (!row) throw new AppError('webhook/not_found');
      return toEndpointResponse(row);
    });
  }
}
