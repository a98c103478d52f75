import { Queryable } from '../../shared/db/db.service';
import { MailService, MailTemplate } from '../../shared/mail/mail.service';

/** A change of a user's second factor the user is told of by email (template `mfa_changed`). */
export type MfaChange = 'enabled' | 'disabled' | 'recovery_codes_regenerated';

/**
 * Mails the user at their address in the caller's transaction (the outbox); nothing for a user
 * without one. `notice`: capped per kind of change (MailLimits.noticeAllowed).
 */
async function mailUser(tx: Queryable, mail: MailService, user: { tenantId: string; userId: string }, template: MailTemplate, data: Record<string, unknown>, notice: boolean): Promise<void> {
  const [u] = await tx.query<{ email: string | null }>(`SELECT email FROM users WHERE id = $1 AND tenant_id = $2`, [user.userId, user.tenantId], 'mfa_notice_email');
  if (u?.email) await mail.enqueue(tx, { tenantId: user.tenantId, to: u.email, template, data, notice });
}

/**
 * Tells the user by email, in the change's transaction (the outbox), that their second factor
 * changed, as a password change does: someone holding a stolen session and password could
 * otherwise turn MFA off, or on with their own authenticator (locking the owner out), unnoticed.
 */
export function noticeMfaChange(tx: Queryable, mail: MailService, user: { tenantId: string; userId: string }, change: MfaChange): Promise<void> {
  return mailUser(tx, mail, user, 'mfa_changed', { change }, true);
}

/**
 * Tells the user by email, with the audit row of the failure, that a sign-in passed their first
 * factor (`firstFactor`: its amr, e.g. `pwd`, `otp` for an email code) and then gave a wrong
 * second-factor code: whoever it was knows the password (or reads the mailbox). The caller sends
 * it for the first failure of a throttle window only, from an address that never passed MFA for
 * the user, so a guessing attack is one mail, not 50, and the owner's own typo none.
 */
export function noticeMfaSignInFailed(tx: Queryable, mail: MailService, user: { tenantId: string; userId: string }, firstFactor: string[]): Promise<void> {
  // sent once per throttle window already (see the caller): not capped again
  return mailUser(tx, mail, user, 'mfa_sign_in_failed', { first_factor: firstFactor.includes('pwd') ? 'password' : 'email' }, false);
}
