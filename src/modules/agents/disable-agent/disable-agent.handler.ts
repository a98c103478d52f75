import { requireInvalidated } from '../../../shared/cache/read-through.cache';
import { CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import { Db } from '../../../shared/db/db.service';
import { EventsService } from '../../../shared/events/events.service';
import { AgentClientCache } from '../agent-client.cache';
import { agentAdminEvent } from '../agent-events';
import { AppError } from '../../../shared/errors/app-error';
import { agentNotFound } from '../agent.errors';
import { AGENT_COLUMNS, AgentResponse, AgentRow, toAgentResponse } from '../agent.response.dto';
import { DisableAgentCommand } from './disable-agent.command';

/**
 * Clears the grant types (no new token can be issued) and emits
 * `oauth.token_exchange.client_disabled` (spec 6) once: a repeat on a disabled agent answers it
 * unchanged. A revoked agent is 409 agent/already_revoked. A later PATCH of grant_types enables it.
 */
@CommandHandler(DisableAgentCommand)
export class DisableAgentHandler implements ICommandHandler<DisableAgentCommand> {
  constructor(
    private readonly db: Db,
    private readonly events: EventsService,
    private readonly cache: AgentClientCache,
  ) {}

  async execute(cmd: DisableAgentCommand): Promise<AgentResponse> {
    const tenantId = cmd.actor.tenant!.id;
    const result = await this.db.tx(async (tx) => {
      // the row lock serializes racing disables: exactly one emits the event
      const [cur] = await tx.query<AgentRow>(`SELECT ${AGENT_COLUMNS} FROM agent_clients WHERE id = $1 AND tenant_id = $2 FOR UPDATE`, [cmd.agentId, tenantId]);
      if (!cur) throw agentNotFound();
      if (cur.revoked_at) throw new AppError('agent/already_revoked', 'The agent was revoked; revocation is final');
      if (cur.disabled_at) return toAgentResponse(cur);
      const [row] = await tx.query<AgentRow>(
        `UPDATE agent_clients SET grant_types = '{}', disabled_at = now(), updated_at = now() WHERE id = $1 RETURNING ${AGENT_COLUMNS}`,
        [cur.id],
      );
      await this.events.auditAndOutbox(
        tx,
        ...agentAdminEvent(cmd.actor, 'oauth.token_exchange.client_disabled', row.id, 'medium', {
          disabled_at: row.disabled_at!.toISOString(),
          previous_grant_types: cur.grant_types,
        }),
      );
      return toAgentResponse(row);
    });
    // after the commit, before the answer: no process authenticates the client from the old row again
    requireInvalidated(await this.cache.invalidate([cmd.agentId]));
    return result;
  }
}
