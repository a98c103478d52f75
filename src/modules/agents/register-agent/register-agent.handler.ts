import { canonicalLogoUrl } from '../logo-url';
import { CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import { randomToken, sha256Hex } from '../../../shared/crypto/tokens';
import { Db } from '../../../shared/db/db.service';
import { AppError } from '../../../shared/errors/app-error';
import { EventsService } from '../../../shared/events/events.service';
import { checkAgentFields } from '../agent.errors';
import { AGENT_COLUMNS, AgentRow, AgentWithSecretResponse, toAgentResponse } from '../agent.response.dto';
import { AGENT_GRANT_TYPES } from '../agents.service';
import { RegisterAgentCommand } from './register-agent.command';
import { assertTenantCap } from '../../../shared/db/tenant-cap';

/** Live (not revoked) agents a tenant may hold (409 agent/limit_reached beyond). */
export const MAX_LIVE_AGENTS_PER_TENANT = 500;

/** Without grant_types, an agent gets the token-exchange grant (the reason agents exist here). */
export const DEFAULT_AGENT_GRANT_TYPES = [AGENT_GRANT_TYPES[0]];

@CommandHandler(RegisterAgentCommand)
export class RegisterAgentHandler implements ICommandHandler<RegisterAgentCommand> {
  constructor(
    private readonly db: Db,
    private readonly events: EventsService,
  ) {}

  async execute(cmd: RegisterAgentCommand): Promise<AgentWithSecretResponse> {
    const tenantId = cmd.actor.tenant!.id;
    const b = cmd.body;
    // the client secret is 256 random bits, revealed once; only its SHA-256 is stored (architecture rule 8)
    const secret = randomToken();
    return this.db.tx(async (tx) => {
      // spec 5 rule 3: agent clients need the Pro tier or higher (the tier is the operator's, read it fresh)
      const [tenant] = await tx.query<{ tier: string }>(`SELECT tier FROM tenants WHERE id = $1`, [tenantId]);
      if (!tenant || tenant.tier === 'free') throw new AppError('agent/tier_unauthorized', 'Agent clients require the Pro tier or higher');
      checkAgentFields(b);
      // as API keys: a client secret each, so a stolen dashboard session cannot mint them without end
      await assertTenantCap(tx, {
        kind: 'agent_clients',
        tenantId,
        countSql: `SELECT count(*)::int AS n FROM agent_clients WHERE tenant_id = $1 AND revoked_at IS NULL`,
        max: MAX_LIVE_AGENTS_PER_TENANT,
        code: 'agent/limit_reached',
        what: 'live agents; revoke one first',
      });
      const [row] = await tx.query<AgentRow>(
        `INSERT INTO agent_clients (tenant_id, name, description, agent_class, logo_url, scopes, grant_types, agent_token_max_ttl_sec,
                                    rate_limits, max_concurrent_tokens, secret_hash, created_by)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
         RETURNING ${AGENT_COLUMNS}`,
        [
          tenantId,
          b.name,
          b.description ?? null,
          b.agent_class ?? null,
          canonicalLogoUrl(b.logo_url) ?? null,
          b.scopes ?? [],
          b.grant_types ?? DEFAULT_AGENT_GRANT_TYPES,
          b.agent_token_max_ttl_sec ?? 900,
          JSON.stringify(b.agent_settings?.rate_limits ?? {}),
          b.agent_settings?.max_concurrent_tokens ?? null,
          sha256Hex(secret),
          cmd.actor.userId,
        ],
      );
      await this.events.audit(tx, {
        tenantId,
        type: 'agent.registered',
        actorType: 'dashboard_user',
        actorId: cmd.actor.userId,
        targetType: 'agent_client',
        targetId: row.id,
        metadata: { agent_client_id: row.id, name: row.name, grant_types: row.grant_types, scopes: row.scopes },
      });
      return { ...toAgentResponse(row), client_secret: secret };
    });
  }
}
