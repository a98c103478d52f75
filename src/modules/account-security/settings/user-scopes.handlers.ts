import { requireInvalidated } from '../../../shared/cache/read-through.cache';
import { Command, CommandHandler, ICommandHandler, IQueryHandler, Query, QueryHandler } from '@nestjs/cqrs';
import { DashboardPrincipal } from '../../../shared/auth/auth-context';
import { ApiKeyCache } from '../../../shared/cache/api-key.cache';
import { AgentClientCache } from '../../agents/agent-client.cache';
import { Db } from '../../../shared/db/db.service';
import { EventsService } from '../../../shared/events/events.service';
import { PutUserScopesDto, UserScopesResponse } from './security-settings.dto';

export class GetUserScopesQuery extends Query<UserScopesResponse> {
  constructor(readonly tenantId: string) {
    super();
  }
}

export class PutUserScopesCommand extends Command<UserScopesResponse> {
  constructor(
    readonly actor: DashboardPrincipal,
    readonly body: PutUserScopesDto,
  ) {
    super();
  }
}

const toList = (stored: string): string[] => stored.split(' ').filter(Boolean);

@QueryHandler(GetUserScopesQuery)
export class GetUserScopesHandler implements IQueryHandler<GetUserScopesQuery, UserScopesResponse> {
  constructor(private readonly db: Db) {}

  async execute(q: GetUserScopesQuery): Promise<UserScopesResponse> {
    const [row] = await this.db.query<{ user_scopes: string }>(`SELECT user_scopes FROM tenants WHERE id = $1`, [q.tenantId]);
    return { user_scopes: toList(row.user_scopes) };
  }
}

/**
 * Sets the scopes of the tenant's user tokens (contract "Tokens": `user_scopes`, default
 * `openid profile email`; tenants add their own). Tokens signed from now on carry them: new
 * sign-ins, and every session's next refresh. One audit event when the list changes, with the old
 * and new lists; the API-key principals (which carry the scopes) are invalidated after the commit.
 */
@CommandHandler(PutUserScopesCommand)
export class PutUserScopesHandler implements ICommandHandler<PutUserScopesCommand, UserScopesResponse> {
  constructor(
    private readonly db: Db,
    private readonly events: EventsService,
    private readonly keys: ApiKeyCache,
    private readonly agents: AgentClientCache,
  ) {}

  async execute(cmd: PutUserScopesCommand): Promise<UserScopesResponse> {
    const tenantId = cmd.actor.tenant!.id;
    const next = [...new Set(cmd.body.user_scopes)];
    await this.db.tx(async (tx) => {
      const [cur] = await tx.query<{ user_scopes: string }>(`SELECT user_scopes FROM tenants WHERE id = $1 FOR UPDATE`, [tenantId]);
      if (cur.user_scopes === next.join(' ')) return;
      await tx.query(`UPDATE tenants SET user_scopes = $2, updated_at = now() WHERE id = $1`, [tenantId, next.join(' ')]);
      await this.events.audit(tx, {
        tenantId,
        type: 'tenant.user_scopes_updated',
        actorType: 'dashboard_user',
        actorId: cmd.actor.userId,
        targetType: 'tenant',
        targetId: tenantId,
        metadata: { from: toList(cur.user_scopes), to: next },
      });
    });
    // also when unchanged: a repeat tells the caches a change whose invalidation failed (503)
    requireInvalidated(await this.keys.invalidateTenant(this.db, tenantId));
    // the agent clients carry them too: a token exchange grants none outside them
    requireInvalidated(await this.agents.invalidateTenant(this.db, tenantId));
    return { user_scopes: next };
  }
}

export const UserScopesHandlers = [GetUserScopesHandler, PutUserScopesHandler];
