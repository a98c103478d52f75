import { CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import { Db } from '../../../shared/db/db.service';
import { AppError } from '../../../shared/errors/app-error';
import { EventsService } from '../../../shared/events/events.service';
import { redactedUrl } from '../url-policy';
import { DeleteWebhookCommand } from './delete-webhook.command';

@CommandHandler(DeleteWebhookCommand)
export class DeleteWebhookHandler implements ICommandHandler<DeleteWebhookCommand> {
  constructor(
    private readonly db: Db,
    private readonly events: EventsService,
  ) {}

  async execute(cmd: DeleteWebhookCommand): Promise<void> {
    const tenantId = cmd.actor.tenant!.id;
    await this.db.tx(async (tx) => {
      const [gone] = await tx.query<{ url: string }>(`DELETE FROM webhook_endpoints WHERE id = $1 AND tenant_id = $2 RETURNING url`, [cmd.endpointId, tenantId]);
      if (!gone) throw new AppError('webhook/not_found');
      await this.events.audit(tx, {
        tenantId,
        type: 'webhook.deleted',
        actorType: 'dashboard_user',
        actorId: cmd.actor.userId,
        targetType: 'webhook_endpoint',
        targetId: cmd.endpointId,
        metadata: { url: redactedUrl(gone.url) },
      });
    });
  }
}
