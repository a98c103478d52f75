import { CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import { Db } from '../../../shared/db/db.service';
import { EventsService } from '../../../shared/events/events.service';
import { AgentDenylistService } from '../agent-denylist.service';
import { AgentTokenSlotsService } from '../agent-token-slots.service';
import { agentAdminEvent } from '../agent-events';
import { notUpdatable } from '../agent.errors';
import { KillAgentTokensResponse } from '../agent.response.dto';
import { KillAgentTokensCommand } from './kill-agent-tokens.command';

/**
 * A `tokens_killed` denylist entry: tokens of the agent issued before now are refused for
 * agent_token_max_ttl_sec (the longest any of them lives); tokens exchanged afterwards work.
 * Emits `oauth.token_exchange.revocation_requested` (spec 6). A revoked agent is 409.
 */
@CommandHandler(KillAgentTokensCommand)
export class KillAgentTokensHandler implements ICommandHandler<KillAgentTokensCommand> {
  constructor(
    private readonly db: Db,
    private readonly events: EventsService,
    private readonly denylist: AgentDenylistService,
    private readonly slots: AgentTokenSlotsService,
  ) {}

  async execute(cmd: KillAgentTokensCommand): Promise<KillAgentTokensResponse> {
    const tenantId = cmd.actor.tenant!.id;
    const res = await this.db.tx(async (tx) => {
      // the row lock orders a kill against a racing revoke or PATCH of the TTL
      const [agent] = await tx.query<{ id: string; agent_token_max_ttl_sec: number }>(
        `SELECT id, agent_token_max_ttl_sec FROM agent_clients WHERE id = $1 AND tenant_id = $2 AND revoked_at IS NULL FOR UPDATE`,
        [cmd.agentId, tenantId],
      );
      if (!agent) return notUpdatable(tx, tenantId, cmd.agentId);
      const entry = await this.denylist.deny(tx, tenantId, agent.id, 'tokens_killed', agent.agent_token_max_ttl_sec);
      const out = { id: agent.id, not_before: entry.not_before.toISOString(), denylisted_until: entry.expires_at.toISOString() };
      await this.events.auditAndOutbox(
        tx,
        ...agentAdminEvent(cmd.actor, 'oauth.token_exchange.revocation_requested', agent.id, 'high', { not_before: out.not_before, denylisted_until: out.denylisted_until }),
      );
      return out;
    });
    await this.denylist.cacheAfterCommit(res.id);
    // spec 2.10 max_concurrent_tokens: the denylisted tokens are no longer live
    await this.slots.clear(res.id);
    return res;
  }
}
