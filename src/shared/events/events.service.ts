import { Injectable } from '@nestjs/common';
import { Queryable } from '../db/db.service';
import { EnvelopeCipher } from '../crypto/envelope-cipher';
import { insertRowSql, insertRowsSql, transpose } from '../db/insert-row.sql';

const AUDIT_COLUMNS = [
  ['tenant_id', 'uuid'], ['type', 'text'], ['severity', 'text'], ['actor_type', 'text'], ['actor_id', 'text'], ['target_type', 'text'], ['target_id', 'text'], ['metadata', 'jsonb'],
] as const;
const OUTBOX_COLUMNS = [['tenant_id', 'uuid'], ['topic', 'text'], ['event_type', 'text'], ['payload', 'jsonb'], ['secret_enc', 'text']] as const;

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

  /**
   * INSERT of one audit row with parameters numbered from `from` (to compose CTEs). Stamped with
   * the time of the insert (clock_timestamp), not of the transaction's start (now()): a change that
   * waited for a lock (two settings changes of one tenant) is then stamped in the order the changes
   * were made, so the latest row of a trail is the change that holds. (The batched issuances of
   * auditRowsSql keep now(): one statement, and their rows are matched with its other rows by it.)
   */
  auditSql(e: AuditEvent, from: number): [string, unknown[]] {
    return [insertRowSql('audit_events', AUDIT_COLUMNS, from, { created_at: 'clock_timestamp()' }), auditValues(e)];
  }

  /** INSERT of several audit rows (one array parameter per column); `when`: see insertRowsSql. */
  auditRowsSql(events: AuditEvent[], from: number, when?: string): [string, unknown[]] {
    return [insertRowsSql('audit_events', AUDIT_COLUMNS, from, when), transpose(events.map(auditValues), AUDIT_COLUMNS.length)];
  }

  outboxSql(m: OutboxMessage, from: number): [string, unknown[]] {
    return [insertRowSql('outbox', OUTBOX_COLUMNS, from), this.outboxValues(m)];
  }

  /** INSERT of several outbox rows (one array parameter per column); `when`: see insertRowsSql. */
  outboxRowsSql(messages: OutboxMessage[], from: number, when?: string): [string, unknown[]] {
    return [insertRowsSql('outbox', OUTBOX_COLUMNS, from, when), transpose(messages.map((m) => this.outboxValues(m)), OUTBOX_COLUMNS.length)];
  }

  private outboxValues(m: OutboxMessage): unknown[] {
    return [m.tenantId, m.topic, m.eventType, JSON.stringify(m.payload), m.secret ? this.cipher.encrypt(JSON.stringify(m.secret)) : null];
  }
}

function auditValues(e: AuditEvent): unknown[] {
  return [e.tenantId, e.type, e.severity ?? 'info', e.actorType, e.actorId ?? null, e.targetType ?? null, e.targetId ?? null, JSON.stringify(e.metadata ?? {})];
}
