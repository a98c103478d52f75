import { Injectable } from '@nestjs/common';
import { Queryable } from '../db/db.service';
import { EventsService } from '../events/events.service';
import { MailLimits } from '../rate-limit/mail-limits.service';

/** Names of the email templates the worker renders (src/shared/mail/templates.ts). */
export type MailTemplate = 'dashboard_invite' | 'email_verification' | 'password_reset' | 'password_changed' | 'magic_link' | 'email_otp' | 'agent_revoked' | 'webhook_disabled' | 'mfa_changed' | 'mfa_sign_in_failed' | 'dashboard_password_reset' | 'dashboard_password_changed';

/** The mails a tenant's dashboard members get (invitations, resets, notices to owners); every other template is an end user's. */
export const DASHBOARD_MAIL_TEMPLATES: ReadonlySet<MailTemplate> = new Set<MailTemplate>(['dashboard_invite', 'dashboard_password_reset', 'dashboard_password_changed', 'agent_revoked', 'webhook_disabled']);
/** The mails an end user gets. */
export const END_USER_MAIL_TEMPLATES: ReadonlySet<MailTemplate> = new Set<MailTemplate>(
  (['email_verification', 'password_reset', 'password_changed', 'magic_link', 'email_otp', 'mfa_changed', 'mfa_sign_in_failed'] as const).filter((t) => !DASHBOARD_MAIL_TEMPLATES.has(t)),
);

/** The outbox topic (and BullMQ queue) of emails. */
export const MAIL_TOPIC = 'email';

/** The outbox payload of an email; its secret fields travel separately, encrypted. */
export interface MailPayload {
  to: string;
  template: MailTemplate;
  data: Record<string, unknown>;
}

export interface MailRequest {
  tenantId: string | null;
  to: string;
  template: MailTemplate;
  /** non-secret template data (tenant name, role, ...) */
  data: Record<string, unknown>;
  /** secret template data (link tokens, codes): encrypted at rest in the outbox */
  secret?: Record<string, unknown>;
  /** a notice of a change (not a requested link or code): capped per recipient and kind of change, see MailLimits.noticeAllowed */
  notice?: boolean;
}

/** What a notice tells: its template and, where one template tells several changes (mfa_changed), which. */
function noticeKind(mail: MailRequest): string {
  const change = mail.data.change;
  return typeof change === 'string' ? `${mail.template}:${change}` : mail.template;
}

/**
 * Emails leave through the transactional outbox (topic `email`): written in the caller's
 * transaction, relayed to BullMQ and sent by the worker, so a committed email is never lost.
 */
@Injectable()
export class MailService {
  constructor(
    private readonly events: EventsService,
    private readonly limits: MailLimits,
  ) {}

  async enqueue(tx: Queryable, mail: MailRequest): Promise<void> {
    if (mail.notice && !(await this.limits.noticeAllowed(noticeKind(mail), mail.tenantId, mail.to))) return;
    await this.events.outbox(tx, {
      tenantId: mail.tenantId,
      topic: MAIL_TOPIC,
      eventType: `email.${mail.template}`,
      payload: { to: mail.to, template: mail.template, data: mail.data } satisfies MailPayload,
      secret: mail.secret,
    });
  }

  /**
   * An erasure's part of the outbox (GDPR Art. 17): deletes the unsettled mails of `templates`
   * whose recipient is this address (compared by `keyOf`, the key every lookup by email uses), of
   * the tenants in `tenantIds` (and, with `noTenant`, those of no tenant: a dashboard account's
   * reset links). Only the erased person's own mails: the same address may be another tenant's end
   * user, or the tenant's dashboard member, whose mails are not this erasure's. Unsettled rows are
   * few (the relay moves them within a second, the mail worker settles them once sent or given up)
   * and found through the outbox's two partial indexes. A row the relay is moving right now is
   * waited for, then deleted all the same; the mail worker sends only while its row is owed, so a
   * job already queued sends nothing (but for one being handed to SMTP at that moment). Returns
   * how many went.
   */
  async dropUnsent(
    tx: Queryable,
    to: { tenantIds: string[]; noTenant?: boolean; templates: ReadonlySet<MailTemplate>; emailNormalized: string; keyOf: (address: string) => string },
  ): Promise<number> {
    const pending = await tx.query<{ id: string; to: string | null; template: string | null }>(
      `SELECT id::text AS id, payload->>'to' AS to, payload->>'template' AS template FROM outbox
        WHERE topic = $1 AND (dispatched_at IS NULL OR (dispatched_at IS NOT NULL AND processed_at IS NULL))
          AND (tenant_id = ANY ($2::uuid[]) OR ($3::boolean AND tenant_id IS NULL))`,
      [MAIL_TOPIC, to.tenantIds, Boolean(to.noTenant)],
    );
    const ids = pending
      .filter((m) => typeof m.to === 'string' && to.keyOf(m.to) === to.emailNormalized && to.templates.has(m.template as MailTemplate))
      .map((m) => m.id);
    if (!ids.length) return 0;
    const { rowCount } = await tx.exec(`DELETE FROM outbox WHERE id = ANY ($1::bigint[]) AND processed_at IS NULL`, [ids]);
    return rowCount;
  }
}
