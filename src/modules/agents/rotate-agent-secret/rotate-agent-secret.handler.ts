import { requireInvalidated } from '../../../shared/cache/read-through.cache';
import { CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import { randomToken, sha256Hex } from '../../../shared/crypto/tokens';
import { Db } from '../../../shared/db/db.service';
import { EventsService } from '../../../shared/events/events.service';
import { AgentClientCache } from '../agent-client.cache';
import { notUpdatable } from '../agent.errors';
import { AGENT_COLUMNS, AgentRow, AgentWithSecretResponse, toAgentResponse } from '../agent.response.dto';
import { RotateAgentSecretCommand } from './rotate-agent-secret.command';

@CommandHandler(RotateAgentSecretCommand)
export class RotateAgentSecretHandler implements ICommandHandler<RotateAgentSecretCommand> {
  constructor(
    private readonly db: Db,
    private readonly events: EventsService,
    private readonly cache: AgentClientCache,
  ) {}

  async execute(cmd: RotateAgentSecretCommand): Promise<AgentWithSecretResponse> {
    const tenantId = cmd.actor.tenant!.id;
    const secret = randomToken();
    const result = await this.db.tx(async (tx) => {
      // spec 3.2: rotate-secret on a revoked agent is 409 agent/already_revoked
      const [row] = await tx.query<AgentRow>(
        `UPDATE agent_clients SET secret_hash = $3, updated_at = now()
          WHERE id = $1 AND tenant_id = $2 AND revoked_at IS NULL
          RETURNING ${AGENT_COLUMNS}`,
        [cmd.agentId, tenantId, sha256Hex(secret)],
      );
      if (!row) return notUpdatable(tx, tenantId, cmd.agentId);
      await this.events.audit(tx, {
        tenantId,
        type: 'agent.secret_rotated',
        actorType: 'dashboard_user',
        actorId: cmd.actor.userId,
        targetType: 'agent_client',
        targetId: row.id,
        severity: 'medium',
        metadata: { agent_client_id: row.id },
      });
      return { ...toAgentResponse(row), client_secret: secret };
    });
    // after the commit, before the answer: no process authenticates the client from the old row again
    requireInvalidated(await this.cache.invalidate([cmd.agentId]));
    return result;
  }
}
