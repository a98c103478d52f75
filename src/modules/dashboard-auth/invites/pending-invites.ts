import { ApiProperty } from '@nestjs/swagger';
import { Command, CommandHandler, ICommandHandler, IQueryHandler, Query, QueryHandler } from '@nestjs/cqrs';
import { DashboardPrincipal } from '../../../shared/auth/auth-context';
import { Db } from '../../../shared/db/db.service';
import { CursorQuery, keysetPosition, Page, toPage } from '../../../shared/db/pagination';
import { AppError } from '../../../shared/errors/app-error';
import { EventsService } from '../../../shared/events/events.service';

export class ListInvitesQueryDto extends CursorQuery {}

export class PendingInviteResponseDto {
  @ApiProperty({ format: 'uuid' }) id!: string;
  @ApiProperty({ format: 'email' }) email!: string;
  @ApiProperty({ enum: ['owner', 'member'] }) role!: 'owner' | 'member';
  @ApiProperty({ format: 'uuid', nullable: true, type: String, description: 'the owner who sent it (null when that account was deleted)' }) invited_by!: string | null;
  @ApiProperty({ format: 'date-time' }) created_at!: string;
  @ApiProperty({ format: 'date-time' }) expires_at!: string;
}

interface InviteRow {
  id: string;
  email: string;
  role: 'owner' | 'member';
  invited_by: string | null;
  created_at: Date;
  expires_at: Date;
}

const toResponse = (r: InviteRow): PendingInviteResponseDto => ({
  id: r.id,
  email: r.email,
  role: r.role,
  invited_by: r.invited_by,
  created_at: r.created_at.toISOString(),
  expires_at: r.expires_at.toISOString(),
});

export class ListInvitesQuery extends Query<Page<PendingInviteResponseDto>> {
  constructor(readonly tenantId: string, readonly limit: number, readonly cursor?: string) {
    super();
  }
}

/** The tenant's pending invitations (not accepted, not expired), newest first, cursor-paginated. */
@QueryHandler(ListInvitesQuery)
export class ListInvitesHandler implements IQueryHandler<ListInvitesQuery> {
  constructor(private readonly db: Db) {}

  async execute(q: ListInvitesQuery): Promise<Page<PendingInviteResponseDto>> {
    const list = `invites:${q.tenantId}`;
    const pos = keysetPosition(q.cursor, list);
    const rows = await this.db.query<InviteRow & { created_at_text: string }>(
      `SELECT id, email, role, invited_by, created_at, expires_at, created_at::text AS created_at_text FROM dashboard_invites
        WHERE tenant_id = $1 AND accepted_at IS NULL AND expires_at > now()
          AND ($2::timestamptz IS NULL OR (created_at, id) < ($2::timestamptz, $3::uuid))
        ORDER BY created_at DESC, id DESC LIMIT $4`,
      [q.tenantId, pos?.[0] ?? null, pos?.[1] ?? null, q.limit + 1],
    );
    return toPage(rows, q.limit, toResponse, (r) => [r.created_at_text, r.id], list);
  }
}

export class RevokeInviteCommand extends Command<void> {
  constructor(readonly actor: DashboardPrincipal, readonly inviteId: string) {
    super();
  }
}

/**
 * An owner withdraws a pending invitation: its token is refused from now on (400 invite/invalid).
 * An accepted, expired, unknown or other tenant's invitation is 404 invite/not_found. Audited.
 */
@CommandHandler(RevokeInviteCommand)
export class RevokeInviteHandler implements ICommandHandler<RevokeInviteCommand> {
  constructor(private readonly db: Db, private readonly events: EventsService) {}

  async execute(cmd: RevokeInviteCommand): Promise<void> {
    const tenantId = cmd.actor.tenant!.id;
    await this.db.tx(async (tx) => {
      const [gone] = await tx.query<{ email_normalized: string; role: string }>(
        `DELETE FROM dashboard_invites WHERE id = $1 AND tenant_id = $2 AND accepted_at IS NULL AND expires_at > now() RETURNING email_normalized, role`,
        [cmd.inviteId, tenantId],
      );
      if (!gone) throw new AppError('invite/not_found');
      await this.events.audit(tx, {
        tenantId,
        type: 'dashboard.invite_revoked',
        actorType: 'dashboard_user',
        actorId: cmd.actor.userId,
        targetType: 'invite',
        targetId: cmd.inviteId,
        metadata: { role: gone.role },
      });
    });
  }
}
