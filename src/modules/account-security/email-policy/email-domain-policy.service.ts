import { Injectable } from '@nestjs/common';
import { Db } from '../../../shared/db/db.service';
import { AppError } from '../../../shared/errors/app-error';
import { EmailPolicySettings, emailRefusal } from './email-domain-policy';

const DETAILS: Record<string, string> = {
  'email/domain_blocked': 'This email domain is blocked by the application',
  'email/domain_not_allowed': 'Only addresses of the domains allowed by the application are accepted',
  'email/disposable_blocked': 'Disposable email addresses are not accepted; use a permanent address',
  'email/subaddress_blocked': 'Addresses with a +tag are not accepted; use the address without it',
};

/**
 * The tenant's address policy, applied wherever an email enters (register, guest claim, email
 * code sign-up, dashboard invites): plugged into UserEmailPolicy.registerCheck. 422 with one
 * code per rule (contract "Account security flows").
 */
@Injectable()
export class EmailDomainPolicy {
  constructor(private readonly db: Db) {}

  async assertAllowed(tenantId: string, email: string): Promise<void> {
    const [s] = await this.db.query<EmailPolicySettings>(
      `SELECT block_disposable_emails, block_email_subaddresses, email_allowlist, email_blocklist FROM tenants WHERE id = $1`,
      [tenantId],
      'email_policy_settings',
    );
    if (!s) return;
    const code = emailRefusal(s, email);
    if (code) throw new AppError(code, DETAILS[code], { errors: [{ field: 'email', message: DETAILS[code] }] });
  }
}
