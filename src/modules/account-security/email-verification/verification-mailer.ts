import { Inject, Injectable } from '@nestjs/common';
import { APP_CONFIG, AppConfig } from '../../../config/config';
import { Queryable } from '../../../shared/db/db.service';
import { MailService } from '../../../shared/mail/mail.service';
import { normalizeEmail } from '../../users/email';
import { OneTimeTokens } from '../one-time-tokens.service';

/** Issues an email verification link and queues its mail, in the caller's transaction. */
@Injectable()
export class VerificationMailer {
  constructor(
    private readonly tokens: OneTimeTokens,
    private readonly mail: MailService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  async send(tx: Queryable, u: { tenantId: string; tenantName?: string; userId: string; email: string }): Promise<void> {
    const token = await this.tokens.issue(tx, {
      tenantId: u.tenantId,
      userId: u.userId,
      kind: 'email_verification',
      emailNormalized: normalizeEmail(u.email),
      ttlSeconds: this.config.EMAIL_VERIFICATION_TTL_SECONDS,
    });
    await this.mail.enqueue(tx, {
      tenantId: u.tenantId,
      to: u.email,
      template: 'email_verification',
      data: { ...(u.tenantName ? { tenant_name: u.tenantName } : {}), expires_in_minutes: this.config.EMAIL_VERIFICATION_TTL_SECONDS / 60 },
      secret: { token },
    });
  }
}
