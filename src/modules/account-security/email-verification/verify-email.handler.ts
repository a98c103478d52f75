import { CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import { UserProfileCache } from '../../../shared/cache/user-profile.cache';
import { Db } from '../../../shared/db/db.service';
import { AppError } from '../../../shared/errors/app-error';
import { EventsService } from '../../../shared/events/events.service';
import { OneTimeTokens } from '../one-time-tokens.service';
import { VerifyEmailCommand } from './verify-email.command';

/**
 * Single use (conditional update), bound to the API key's tenant and to the address the link
 * was sent to: a link for an address the user has since changed verifies nothing.
 */
@CommandHandler(VerifyEmailCommand)
export class VerifyEmailHandler implements ICommandHandler<VerifyEmailCommand, void> {
  constructor(
    private readonly db: Db,
    private readonly tokens: OneTimeTokens,
    private readonly events: EventsService,
    private readonly profiles: UserProfileCache,
  ) {}

  async execute(cmd: VerifyEmailCommand): Promise<void> {
    const tenantId = cmd.apiKey.tenantId;
    const userId = await this.db.tx(async (tx) => {
      const row = await this.tokens.consume(tx, tenantId, 'email_verification', cmd.token);
      if (!row) throw new AppError('token/invalid');
      const [u] = await tx.query<{ id: string }>(
        `UPDATE users SET email_verified = true, updated_at = now()
          WHERE id = $1 AND tenant_id = $2 AND email_normalized = $3 AND NOT is_anonymous RETURNING id`,
        [row.user_id, tenantId, row.email_normalized],
      );
      if (!u) throw new AppError('token/invalid');
      await this.events.audit(tx, { tenantId, type: 'user.email_verified', actorType: 'user', actorId: u.id, targetType: 'user', targetId: u.id, metadata: { method: 'link' } });
      return u.id;
    });
    await this.profiles.invalidate([userId]);
  }
}
