import { Injectable } from '@nestjs/common';
import { Queryable } from '../db/db.service';
import { EventsService } from '../events/events.service';
import { MailLimits } from '../rate-limit/mail-limits.service';

/** Names of the email templates the worker renders (src/shared/mail/templates.ts). */
export type MailTemplate = 'dashboard_invite' | 'email_verification' | 'password_reset' | 'password_changed' | 'magic_link' | 'email_otp' | 'agent_revoked' | 'webhook_disabled' | 'mfa_changed' | 'mfa_sign_in_failed' | 'dashboard_password_reset' | 'dashboard_password_changed';

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
}
