import { requireInvalidated } from '../../../shared/cache/read-through.cache';
import { CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import { Db } from '../../../shared/db/db.service';
import { EventsService } from '../../../shared/events/events.service';
import { MailService } from '../../../shared/mail/mail.service';
import { AgentClientCache } from '../agent-client.cache';
import { AgentDenylistService } from '../agent-denylist.service';
import { AgentTokenSlotsService } from '../agent-token-slots.service';
import { agentAdminEvent } from '../agent-events';
import { findTenantAgent } from '../agent.errors';
import { RevokeAgentResponse } from '../agent.response.dto';
import { RevokeAgentCommand } from './revoke-agent.command';

interface Revoked {
  id: string;
  name: string;
  revoked_at: Date;
  agent_metadata_version: number;
  agent_token_max_ttl_sec: number;
}

/**
 * spec 3.2: one transaction: the conditional update (exactly one winner among racing DELETEs),
 * the denylist entry valid for agent_token_max_ttl_sec, the high-severity `agent.revoked` audit
 * event and webhook, and an email to every tenant owner. The Redis cache of the denylist is
 * written after the commit (PostgreSQL is the source of truth).
 */
@CommandHandler(RevokeAgentCommand)
export class RevokeAgentHandler implements ICommandHandler<RevokeAgentCommand> {
  constructor(
    private readonly db: Db,
    private readonly events: EventsService,
    private readonly mail: MailService,
    private readonly denylist: AgentDenylistService,
    private readonly slots: AgentTokenSlotsService,
    private readonly cache: AgentClientCache,
  ) {}

  async execute(cmd: RevokeAgentCommand): Promise<RevokeAgentResponse> {
    const tenantId = cmd.actor.tenant!.id;
    const row = await this.db.tx(async (tx) => {
      const [won] = await tx.query<Revoked>(
        `UPDATE agent_clients SET revoked_at = now(), updated_at = now()
          WHERE id = $1 AND tenant_id = $2 AND revoked_at IS NULL
          RETURNING id, name, revoked_at, agent_metadata_version, agent_token_max_ttl_sec`,
        [cmd.agentId, tenantId],
      );
      // a repeat (or a racing loser): 200 with the existing revoked_at, no second event
      if (!won) return findTenantAgent(tx, tenantId, cmd.agentId);
      const entry = await this.denylist.deny(tx, tenantId, won.id, 'agent_revoked', won.agent_token_max_ttl_sec);
      const data = {
        agent_name: won.name,
        revoked_at: won.revoked_at.toISOString(),
        denylisted_until: entry.expires_at.toISOString(),
      };
      await this.events.auditAndOutbox(tx, ...agentAdminEvent(cmd.actor, 'agent.revoked', won.id, 'high', data));
      const owners = await tx.query<{ email: string }>(
        `SELECT u.email FROM tenant_members m JOIN dashboard_users u ON u.id = m.user_id
          WHERE m.tenant_id = $1 AND m.role = 'owner' ORDER BY u.email`,
        [tenantId],
      );
      for (const o of owners) {
        await this.mail.enqueue(tx, { tenantId, to: o.email, template: 'agent_revoked', data: { agent_name: won.name, agent_id: won.id }, notice: true });
      }
      return won;
    });
    // also on a repeat: restores a cache write a crash after an earlier commit may have missed
    await this.denylist.cacheAfterCommit(row.id);
    // spec 2.10 max_concurrent_tokens: the denylisted tokens are no longer live
    await this.slots.clear(row.id);
    requireInvalidated(await this.cache.invalidate([row.id]));
    return { id: row.id, name: row.name, revoked_at: row.revoked_at!.toISOString(), agent_metadata_version: row.agent_metadata_version };
  }
}
