import { AuditEvent, OutboxMessage } from '../../shared/events/events.service';
import { DashboardPrincipal } from '../../shared/auth/auth-context';

/** Outbox topic of tenant webhooks. */
export const WEBHOOK_TOPIC = 'webhook';

/**
 * An agent event of spec 6 from a dashboard action: the audit row and its webhook (payload with
 * agent_client_id, so endpoints can filter on it). Nothing secret or raw goes in either.
 */
export function agentAdminEvent(
  actor: DashboardPrincipal,
  type: string,
  agentId: string,
  severity: AuditEvent['severity'],
  data: Record<string, unknown>,
): [AuditEvent, OutboxMessage] {
  const tenantId = actor.tenant!.id;
  return [
    { tenantId, type, actorType: 'dashboard_user', actorId: actor.userId, targetType: 'agent_client', targetId: agentId, severity, metadata: { agent_client_id: agentId, ...data } },
    { tenantId, topic: WEBHOOK_TOPIC, eventType: type, payload: { tenant_id: tenantId, agent_client_id: agentId, ...data } },
  ];
}
