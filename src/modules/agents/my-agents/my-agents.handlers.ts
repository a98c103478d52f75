import { CommandHandler, ICommandHandler, IQueryHandler, QueryHandler } from '@nestjs/cqrs';
import { Db, Queryable } from '../../../shared/db/db.service';
import { pastSecondOf } from '../../../shared/crypto/jwt.service';
import { keysetPositionAsOf, Page, toPage } from '../../../shared/db/pagination';
import { InvalidTokenError } from '../../../shared/errors/app-error';
import { EventsService } from '../../../shared/events/events.service';
import { agentNotFound } from '../agent.errors';
import { RestoreMyAgentResponse, RevokeMyAgentResponse, UserAgentResponse } from './my-agents.dto';
import { ListMyAgentsQuery, RestoreMyAgentCommand, RevokeMyAgentCommand } from './my-agents.queries';

/** spec 3.3: the reason recorded for an end user's withdrawal. */
export const USER_REVOCATION_REASON = 'gdpr_art_7_withdrawal';

interface MyAgentRow {
  id: string;
  name: string;
  logo_url: string | null;
  agent_class: string | null;
  last_action_at: Date | null;
  action_count: string;
  revoked_at: Date | null;
  agent_revoked_at: Date | null;
  sort_key: string;
  as_of: string;
}

function toResponse(r: MyAgentRow): UserAgentResponse {
  const out: UserAgentResponse = { agent_client_id: r.id, agent_name: r.name, action_count: Number(r.action_count) };
  if (r.logo_url) out.agent_logo_url = r.logo_url;
  if (r.agent_class) out.agent_class = r.agent_class;
  if (r.last_action_at) out.last_action_at = r.last_action_at.toISOString();
  if (r.revoked_at) out.revoked_at = r.revoked_at.toISOString();
  if (r.agent_revoked_at) out.agent_revoked_at = r.agent_revoked_at.toISOString();
  return out;
}

@QueryHandler(ListMyAgentsQuery)
export class ListMyAgentsHandler implements IQueryHandler<ListMyAgentsQuery> {
  constructor(private readonly db: Db) {}

  async execute(q: ListMyAgentsQuery): Promise<Page<UserAgentResponse>> {
    const list = `my_agents:${q.user.tenantId}:${q.user.userId}`;
    const pos = keysetPositionAsOf(q.cursor, list);
    // agents that acted on the caller, plus those the caller revoked or restored (so a withdrawal
    // stays visible even before any action); agents without actions sort last. The order is that
    // of the first page's moment (`as_of`, carried by the cursor): an agent acting while the list
    // is walked keeps its place instead of jumping above the cursor and being skipped
    const rows = await this.db
      .query<MyAgentRow>(
        `WITH snap AS (
           -- the first page's moment: the caller's latest action then (now() before any)
           SELECT coalesce($6::timestamptz, (SELECT max(created_at) FROM agent_actions WHERE tenant_id = $1 AND actor_user_id = $2), now()) AS as_of
         ), acted AS (
           SELECT agent_client_id, max(created_at) AS last_action_at, count(*) AS action_count,
                  max(created_at) FILTER (WHERE created_at <= (SELECT as_of FROM snap)) AS sorted_action_at
             FROM agent_actions WHERE tenant_id = $1 AND actor_user_id = $2 GROUP BY agent_client_id
         ), mine AS (
           SELECT agent_client_id FROM acted
           UNION SELECT agent_client_id FROM agent_user_revocations WHERE tenant_id = $1 AND user_id = $2
         ), listed AS (
           SELECT c.id, c.name, c.logo_url, c.agent_class, a.last_action_at, coalesce(a.action_count, 0) AS action_count,
                  r.revoked_at, c.revoked_at AS agent_revoked_at, coalesce(a.sorted_action_at, '-infinity'::timestamptz) AS sort_ts
             FROM mine m
             JOIN agent_clients c ON c.id = m.agent_client_id AND c.tenant_id = $1
             LEFT JOIN acted a ON a.agent_client_id = m.agent_client_id
             LEFT JOIN agent_user_revocations r ON r.tenant_id = $1 AND r.user_id = $2 AND r.agent_client_id = m.agent_client_id
         )
         SELECT *, sort_ts::text AS sort_key, (SELECT as_of FROM snap)::text AS as_of FROM listed
          WHERE $3::timestamptz IS NULL OR (sort_ts, id) < ($3::timestamptz, $4::uuid)
          ORDER BY sort_ts DESC, id DESC LIMIT $5`,
        [q.user.tenantId, q.user.userId, pos?.[0] ?? null, pos?.[1] ?? null, q.limit + 1, pos?.[2] || null],
      );
    return toPage(rows, q.limit, toResponse, (r) => [r.sort_key, r.id, r.as_of], list);
  }
}

/** The tenant's agent (any state) or 404: another tenant's agent is unknown here. */
async function tenantAgent(q: Queryable, tenantId: string, agentId: string, share = false): Promise<{ id: string; revoked_at: Date | null; disabled_at: Date | null; below_pro: boolean }> {
  const [a] = await q.query<{ id: string; revoked_at: Date | null; disabled_at: Date | null; below_pro: boolean }>(
    `SELECT a.id, a.revoked_at, a.disabled_at, t.tier = 'free' AS below_pro
       FROM agent_clients a JOIN tenants t ON t.id = a.tenant_id WHERE a.id = $1 AND a.tenant_id = $2${share ? ' FOR SHARE OF a' : ''}`,
    [agentId, tenantId],
  );
  if (!a) throw agentNotFound();
  return a;
}

/**
 * spec 3.3: one row per (tenant, user, agent); the conditional upsert gives racing repeats one
 * winner, so revoked_at and the audit event happen once. Already-issued agent tokens stay valid
 * until their TTL; new token-exchange and CIBA issuance for the pair is refused (isUserRevoked).
 */
@CommandHandler(RevokeMyAgentCommand)
export class RevokeMyAgentHandler implements ICommandHandler<RevokeMyAgentCommand> {
  constructor(
    private readonly db: Db,
    private readonly events: EventsService,
  ) {}

  async execute(cmd: RevokeMyAgentCommand): Promise<RevokeMyAgentResponse> {
    const { tenantId, userId } = cmd.user;
    return this.db.tx(async (tx) => {
      await tenantAgent(tx, tenantId, cmd.agentId);
      const [won] = await tx
        .query<{ revoked_at: Date; reason: string }>(
          `INSERT INTO agent_user_revocations (tenant_id, user_id, agent_client_id, reason, revoked_at, restored_at)
           VALUES ($1, $2, $3, $4, now(), NULL)
           ON CONFLICT (tenant_id, user_id, agent_client_id)
             DO UPDATE SET revoked_at = now(), reason = EXCLUDED.reason, restored_at = NULL
             WHERE agent_user_revocations.revoked_at IS NULL
           RETURNING revoked_at, reason`,
          [tenantId, userId, cmd.agentId, USER_REVOCATION_REASON],
        )
        .catch((e: { code?: string }) => {
          // the user row is gone (deleted after the token was issued)
          if (e.code === '23503') throw new InvalidTokenError('invalid_token', 'The user no longer exists');
          throw e;
        });
      if (won) {
        await this.events.audit(tx, {
          tenantId,
          type: 'agent.user_revoked',
          actorType: 'user',
          actorId: userId,
          targetType: 'agent_client',
          targetId: cmd.agentId,
          severity: 'medium',
          metadata: { agent_client_id: cmd.agentId, reason: won.reason },
        });
        return { agent_client_id: cmd.agentId, revoked_at: won.revoked_at.toISOString(), reason: won.reason };
      }
      const [existing] = await tx.query<{ revoked_at: Date; reason: string }>(
        `SELECT revoked_at, reason FROM agent_user_revocations WHERE tenant_id = $1 AND user_id = $2 AND agent_client_id = $3`,
        [tenantId, userId, cmd.agentId],
      );
      return { agent_client_id: cmd.agentId, revoked_at: existing.revoked_at.toISOString(), reason: existing.reason };
    });
  }
}

@CommandHandler(RestoreMyAgentCommand)
export class RestoreMyAgentHandler implements ICommandHandler<RestoreMyAgentCommand> {
  constructor(
    private readonly db: Db,
    private readonly events: EventsService,
  ) {}

  async execute(cmd: RestoreMyAgentCommand): Promise<RestoreMyAgentResponse> {
    const { tenantId, userId } = cmd.user;
    return this.db.tx(async (tx) => {
      // share-locked until the answer: a dashboard revoke or disable of the agent waits for the
      // restore, so still_blocked_by reports the agent as it is when the restore commits (read
      // unlocked, one committed meanwhile answered "usable" after its own 200)
      const agent = await tenantAgent(tx, tenantId, cmd.agentId, true);
      const [done] = await tx.query<{ restored_at: Date }>(
        `UPDATE agent_user_revocations SET revoked_at = NULL, restored_at = clock_timestamp()
          WHERE tenant_id = $1 AND user_id = $2 AND agent_client_id = $3 AND revoked_at IS NOT NULL
          RETURNING restored_at`,
        [tenantId, userId, cmd.agentId],
      );
      // spec 2.10: on a no-op, restored_at is the current time, newly_restored false, no audit event
      if (!done) return { agent_client_id: cmd.agentId, restored_at: new Date().toISOString(), newly_restored: false };
      await this.events.audit(tx, {
        tenantId,
        type: 'agent.user_restored',
        actorType: 'user',
        actorId: userId,
        targetType: 'agent_client',
        targetId: cmd.agentId,
        metadata: { agent_client_id: cmd.agentId },
      });
      const out: RestoreMyAgentResponse = { agent_client_id: cmd.agentId, restored_at: done.restored_at.toISOString(), newly_restored: true };
      // a tenant-level block still applies: the agent revoked or disabled by the dashboard, or the
      // tenant below the Pro tier agents need (spec 5 rule 3; token exchange refuses it)
      if (agent.revoked_at || agent.disabled_at || agent.below_pro) out.still_blocked_by = 'tenant';
      // introspection tells the tokens the withdrawal ended from new ones by iat (whole seconds)
      // against restored_at: the restore commits only once the second of restored_at is over, so
      // every token issued after it has a later iat (meanwhile exchanges see the pair withdrawn)
      await pastSecondOf(done.restored_at);
      return out;
    });
  }
}
