import { Injectable } from '@nestjs/common';
import { Queryable } from '../db/db.service';
import { EnvelopeCipher } from '../crypto/envelope-cipher';

export type Severity = 'info' | 'low' | 'medium' | 'high';

export interface AuditEvent {
  tenantId: string | null;
  type: string;
  actorType: 'user' | 'dashboard_user' | 'api_key' | 'agent' | 'system' | 'anonymous';
  actorId?: string | null;
  targetType?: string | null;
  targetId?: string | null;
  severity?: Severity;
  /** never raw tokens, IPs, user agents or secrets: hash prefixes only */
  metadata?: Record<string, unknown>;
}

export interface OutboxMessage {
  tenantId: string | null;
  /** BullMQ queue the relay hands it to: `email`, `webhook`, ... */
  topic: string;
  /** event type, e.g. `user.claimed` */
  eventType: string;
  payload: Record<string, unknown>;
  /** fields holding secrets (a link token) are envelope-encrypted at rest */
  secret?: Record<string, unknown>;
}

/**
 * The one audit + outbox writer. Both rows are written with the caller's transaction, so they
 * commit or roll back with the change they record (architecture rule 4).
 */
@Injectable()
export class EventsService {
  constructor(private readonly cipher: EnvelopeCipher) {}

  async audit(tx: Queryable, e: AuditEvent): Promise<void> {
    const [sql, params] = this.auditSql(e, 1);
    await tx.query(sql, params);
  }

  async outbox(tx: Queryable, m: OutboxMessage): Promise<void> {
    const [sql, params] = this.outboxSql(m, 1);
    await tx.query(sql, params);
  }

  /** Audit and outbox rows in one statement. */
  async auditAndOutbox(tx: Queryable, e: AuditEvent, m: OutboxMessage): Promise<void> {
    const [a, ap] = this.auditSql(e, 1);
    const [o, op] = this.outboxSql(m, ap.length + 1);
    await tx.query(`WITH a AS (${a} RETURNING 1) ${o}`, [...ap, ...op]);
  }

  /** INSERT of one audit row with parameters numbered from `from` (to compose CTEs). */
  auditSql(e: AuditEvent, from: number): [string, unknown[]] {
    const p = (i: number) => `$${from + i}`;
    return [
      `INSERT INTO audit_events (tenant_id, type, severity, actor_type, actor_id, target_type, target_id, metadata)
       VALUES (${p(0)}, ${p(1)}, ${p(2)}, ${p(3)}, ${p(4)}, ${p(5)}, ${p(6)}, ${p(7)})`,
      [e.tenantId, e.type, e.severity ?? 'info', e.actorType, e.actorId ?? null, e.targetType ?? null, e.targetId ?? null, JSON.stringify(e.metadata ?? {})],
    ];
  }

  outboxSql(m: OutboxMessage, from: number): [string, unknown[]] {
    const p = (i: number) => `$${from + i}`;
    return [
      `INSERT INTO outbox (tenant_id, topic, event_type, payload, secret_enc) VALUES (${p(0)}, ${p(1)}, ${p(2)}, ${p(3)}, ${p(4)})`,
      [m.tenantId, m.topic, m.eventType, JSON.stringify(m.payload), m.secret ? this.cipher.encrypt(JSON.stringify(m.secret)) : null],
    ];
  }
}
