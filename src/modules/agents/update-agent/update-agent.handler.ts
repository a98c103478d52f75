import { canonicalLogoUrl } from '../logo-url';
import { requireInvalidated } from '../../../shared/cache/read-through.cache';
import { Logger } from '@nestjs/common';
import { CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import { Db } from '../../../shared/db/db.service';
import { EventsService } from '../../../shared/events/events.service';
import { RateLimitService } from '../../../shared/rate-limit/rate-limit.service';
import { AgentClientCache } from '../agent-client.cache';
import { AgentTokenSlotsService } from '../agent-token-slots.service';
import { checkAgentFields, notUpdatable } from '../agent.errors';
import { AGENT_COLUMNS, AgentResponse, AgentRow, toAgentResponse } from '../agent.response.dto';
import { AGENT_LIMIT_BUCKETS, agentLimitKey } from '../agents.service';
import { UpdateAgentCommand } from './update-agent.command';

@CommandHandler(UpdateAgentCommand)
export class UpdateAgentHandler implements ICommandHandler<UpdateAgentCommand> {
  private readonly log = new Logger(UpdateAgentHandler.name);
  constructor(
    private readonly db: Db,
    private readonly events: EventsService,
    private readonly cache: AgentClientCache,
    private readonly slots: AgentTokenSlotsService,
    private readonly limiter: RateLimitService,
  ) {}

  async execute(cmd: UpdateAgentCommand): Promise<AgentResponse> {
    const tenantId = cmd.actor.tenant!.id;
    const b = cmd.body;
    // column names come from this list only; values are parameters
    const sets: string[] = [];
    const params: unknown[] = [cmd.agentId, tenantId];
    const set = (column: string, value: unknown) => {
      params.push(value);
      sets.push(`${column} = $${params.length}`);
    };
    if (b.name !== undefined) set('name', b.name);
    if (b.description !== undefined) set('description', b.description);
    if (b.agent_class !== undefined) set('agent_class', b.agent_class);
    if (b.logo_url !== undefined) set('logo_url', canonicalLogoUrl(b.logo_url));
    if (b.scopes !== undefined) set('scopes', b.scopes);
    if (b.grant_types !== undefined) {
      set('grant_types', b.grant_types);
      // granting again ends a dashboard disable (spec 3.2: disable only clears the grant types)
      if (b.grant_types.length) sets.push('disabled_at = NULL');
    }
    if (b.agent_token_max_ttl_sec !== undefined) set('agent_token_max_ttl_sec', b.agent_token_max_ttl_sec);
    if (b.agent_settings?.rate_limits !== undefined) set('rate_limits', JSON.stringify(b.agent_settings.rate_limits));
    if (b.agent_settings?.max_concurrent_tokens !== undefined) set('max_concurrent_tokens', b.agent_settings.max_concurrent_tokens);
    const changed = Object.keys(b).filter((k) => (b as Record<string, unknown>)[k] !== undefined);

    const result = await this.db.tx(async (tx) => {
      // the agent before the body's values (spec 3.2, 7.4): an unknown or another tenant's agent is
      // 404 and a revoked one 409 whatever the PATCH carries; then the allowlist's 422
      const [live] = await tx.query(`SELECT 1 FROM agent_clients WHERE id = $1 AND tenant_id = $2 AND revoked_at IS NULL FOR UPDATE`, [cmd.agentId, tenantId]);
      if (!live) return notUpdatable(tx, tenantId, cmd.agentId);
      checkAgentFields(b);
      // spec 3.2: conditional on revoked_at IS NULL; spec 9: each PATCH increments agent_metadata_version
      const [row] = await tx.query<AgentRow>(
        `UPDATE agent_clients SET ${[...sets, 'agent_metadata_version = agent_metadata_version + 1', 'updated_at = now()'].join(', ')}
          WHERE id = $1 AND tenant_id = $2 AND revoked_at IS NULL
          RETURNING ${AGENT_COLUMNS}`,
        params,
      );
      if (!row) return notUpdatable(tx, tenantId, cmd.agentId);
      await this.events.audit(tx, {
        tenantId,
        type: 'agent.updated',
        actorType: 'dashboard_user',
        actorId: cmd.actor.userId,
        targetType: 'agent_client',
        targetId: row.id,
        metadata: { agent_client_id: row.id, fields: changed, agent_metadata_version: row.agent_metadata_version },
      });
      return toAgentResponse(row);
    });
    // spec 2.10 max_concurrent_tokens set: the agent's live tokens (issued while none was set, so
    // never counted) count, before any exchange reads the new maximum (the invalidation below)
    if (b.agent_settings?.max_concurrent_tokens != null) await this.slots.seedFromIssued(cmd.agentId);
    // after the commit, before the answer: no process authenticates the client from the old row again
    requireInvalidated(await this.cache.invalidate([cmd.agentId]));
    // new rate limits apply from the next request: a block the old limit set is lifted (the
    // window's count stays, so a counter over the new limit blocks again at once)
    // (the change is committed: Redis away leaves the old block to run out, logged, not answered)
    if (b.agent_settings?.rate_limits !== undefined) {
      for (const bucket of Object.values(AGENT_LIMIT_BUCKETS)) {
        await this.limiter.unblock(bucket!, [agentLimitKey(cmd.agentId)]).catch((e: Error) => this.log.warn(`lifting the rate-limit block of agent ${cmd.agentId}: ${e.message}`));
      }
    }
    return result;
  }
}
