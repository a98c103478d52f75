import { CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import { TokenRevocationService } from '../../../../shared/auth/token-revocation.service';
import { requireInvalidated } from '../../../../shared/cache/read-through.cache';
import { UserProfileCache } from '../../../../shared/cache/user-profile.cache';
import { Db, Queryable } from '../../../../shared/db/db.service';
import { AppError } from '../../../../shared/errors/app-error';
import { EventsService } from '../../../../shared/events/events.service';
import { END_USER_MAIL_TEMPLATES, MailService } from '../../../../shared/mail/mail.service';
import { LoginThrottleService, passwordSignInRealm } from '../../../../shared/rate-limit/login-throttle.service';
import { codeThrottleSubject } from '../../../account-security/email-codes.service';
import { mfaThrottleRealm } from '../../../mfa/mfa-throttle';
import { SessionsService } from '../../../sessions/sessions.service';
import { WEBHOOK_TOPIC } from '../../../webhooks/webhook-events';
import { normalizeEmail } from '../../email';
import { userNotFound } from '../end-user.response.dto';
import { DeleteUserCommand } from './delete-user.command';

interface Erased {
  /** every session the user had: their access tokens must be refused at once */
  sessionIds: string[];
  /** the accounts the failed sign-in throttle keeps state for (LoginThrottleService.forgetAccounts) */
  throttled: { realm: string; account: string }[];
}

/**
 * What the failed sign-in throttle counts under this user: by its address's key, password sign-in
 * and sign-in codes (a new account of the address would inherit them); by its id, second factors
 * and step-up codes (never reused, but the erased person's client addresses all the same).
 */
export function throttledAccounts(tenantId: string, userId: string, emailNormalized: string | null): { realm: string; account: string }[] {
  const byId = [
    { realm: mfaThrottleRealm(tenantId), account: userId },
    codeThrottleSubject({ purpose: 'step_up', tenantId, userId, sessionId: '' }),
  ];
  if (!emailNormalized) return byId;
  return [{ realm: passwordSignInRealm(tenantId), account: emailNormalized }, codeThrottleSubject({ purpose: 'login', tenantId, emailNormalized }), ...byId];
}

/**
 * Erases an end user (GDPR Art. 17), registered or guest, in one transaction:
 * - `users` row; by ON DELETE CASCADE its sessions (and through them its refresh tokens: their
 *   `user_id` has no key of its own), account tokens, email codes bound to it, MFA factors,
 *   recovery codes and challenges, and its per-user agent revocations (`agent_user_revocations`);
 * - `agent_actions` of the user (no foreign key: hot table, migration HotParentKeys): deleted, they
 *   are the user's activity;
 * - `tenant_mau_users` rows (no foreign key): only the guard that a user is counted once a month.
 *   The month's count lives in `tenant_mau.active_users` and is not decremented, so erasing and
 *   re-creating users never gives a tenant room beyond its allowance (a new account is a new id,
 *   counted again, as it should be);
 * - the sign-in code of the address (`email_otp_codes` with purpose `login`, which may have been
 *   issued before the account existed and so carry no user_id);
 * - unsettled mails to the address in the outbox (not yet relayed, or relayed and not yet sent or
 *   given up): they are not sent, and the address leaves PostgreSQL. A mail the relay already
 *   handed to BullMQ is not sent either (the mail worker sends only while its row is owed: one
 *   waiting for a retry is dropped), but for one being handed to SMTP at that moment; a settled
 *   row keeps the address until the outbox sweep (OUTBOX_RETENTION_DAYS);
 * - in Redis, what the failed sign-in throttle keeps of the account (throttledAccounts): its known
 *   client addresses and account-wide failure counters, keyed by the address's key (a new account
 *   of the address would inherit them) or the user id;
 * - one `user.deleted` audit event (the dashboard user as actor, the user id as target, counts
 *   only: no address) and a `user.deleted` webhook event carrying the user id only.
 * Earlier audit rows about the user stay: they hold ids and keyed hash prefixes, never the address.
 *
 * Locks: the user's live sessions first, then the user row (SessionsService.lockUserSessions: a
 * refresh locks its session and then the user row, so the other order could deadlock with it).
 * Of two parallel DELETEs, the second waits, then finds the row gone: 404, no second event.
 *
 * Redis (what a retry can do): the sessions' access tokens must stop at once, but a DELETE
 * repeated after the commit is 404 and finds no session left to name. So the sessions are marked
 * ended in Redis inside the transaction, while the user row lock keeps any new session out (a
 * sign-in inserting one waits for it) and before the delete: if Redis refuses, the transaction
 * rolls back and the 503 leaves everything as it was, for the retry to do it all. After the commit
 * they are marked again and the profile slot (`me:<id>`) is tombstoned; should that fail, the
 * answer is 503 with the erasure committed, and the sessions already refused by the earlier marks
 * (they outlive every access token issued before them). The throttle's state of the account goes
 * the same way: forgotten inside the transaction (Redis refusing rolls it back: 503, nothing
 * changed), and again after the commit, for what a sign-in racing the erasure wrote meanwhile
 * (its failure is a 503 too, the state already forgotten but for that race). What is left, the profile slot, needs only
 * the user id: a DELETE of a user that does not exist tombstones it too before its 404 (503 while
 * Redis refuses), so retrying until 404 completes the erasure. The cost: should the transaction
 * fail after the marks (a deadlock victim, PostgreSQL gone), the user's access tokens are refused
 * until the marks expire (ACCESS_TOKEN_TTL_SECONDS + 60 s) although the user remains; the owner's
 * retry erases it anyway.
 */
@CommandHandler(DeleteUserCommand)
export class DeleteUserHandler implements ICommandHandler<DeleteUserCommand> {
  constructor(
    private readonly db: Db,
    private readonly events: EventsService,
    private readonly sessions: SessionsService,
    private readonly revocation: TokenRevocationService,
    private readonly profiles: UserProfileCache,
    private readonly throttle: LoginThrottleService,
    private readonly mail: MailService,
  ) {}

  async execute(cmd: DeleteUserCommand): Promise<void> {
    const erased = await this.db.tx((tx) => this.erase(tx, cmd));
    if (!erased) {
      // unknown, another tenant's, or erased already (a retry after a 503, the loser of a race):
      // the profile slot is the one thing a retry can still owe Redis
      requireInvalidated(await this.profiles.invalidate([cmd.userId]));
      throw userNotFound();
    }
    const sessionsTold = await this.revocation.markSessionsRevoked(erased.sessionIds).then(
      () => true,
      () => false,
    );
    const profileTold = await this.profiles.invalidate([cmd.userId]);
    const throttleTold = await this.throttle.forgetAccounts(erased.throttled).then(
      () => true,
      () => false,
    );
    if (!sessionsTold || !profileTold || !throttleTold) throw new AppError('server/unavailable', 'The user is erased, but not every server could be told yet: send the DELETE again (it answers 404 once they are)');
  }

  /** The transaction; null when the tenant has no such user (any more). */
  private async erase(tx: Queryable, cmd: DeleteUserCommand): Promise<Erased | null> {
    const tenantId = cmd.actor.tenant!.id;
    const userId = cmd.userId;
    const [seen] = await tx.query(`SELECT 1 FROM users WHERE id = $1 AND tenant_id = $2`, [userId, tenantId]);
    if (!seen) return null;
    await this.sessions.lockUserSessions(tx, userId);
    const [user] = await tx.query<{ email_normalized: string | null; is_anonymous: boolean }>(
      `SELECT email_normalized, is_anonymous FROM users WHERE id = $1 AND tenant_id = $2 FOR UPDATE`,
      [userId, tenantId],
    );
    // a parallel DELETE committed while this one waited for the locks
    if (!user) return null;
    // complete: with the row locked no session can be added (its insert waits for the lock)
    const sessionIds = (await tx.query<{ id: string }>(`SELECT id FROM user_sessions WHERE user_id = $1`, [userId])).map((r) => r.id);
    // before the delete, so that a retry after a failed commit or a failed tell is never owed them (see above)
    await this.revocation.markSessionsRevoked(sessionIds);
    const throttled = throttledAccounts(tenantId, userId, user.email_normalized);
    await this.throttle.forgetAccounts(throttled);

    const agentActions = await tx.exec(`DELETE FROM agent_actions WHERE tenant_id = $1 AND actor_user_id = $2`, [tenantId, userId]);
    // through the primary key: one probe per month of tenant_mau (whose counts are kept; the rows
    // here are swept after the previous month)
    await tx.query(
      `DELETE FROM tenant_mau_users WHERE tenant_id = $1 AND user_id = $2 AND month = ANY (ARRAY(SELECT month FROM tenant_mau WHERE tenant_id = $1))`,
      [tenantId, userId],
    );
    let mailsDropped = 0;
    if (user.email_normalized) {
      await tx.query(`DELETE FROM email_otp_codes WHERE tenant_id = $1 AND purpose = 'login' AND email_normalized = $2`, [tenantId, user.email_normalized]);
      // the end user's mails only: a dashboard invitation or owner notice of the tenant to the same
      // address is its member's
      mailsDropped = await this.mail.dropUnsent(tx, { tenantIds: [tenantId], templates: END_USER_MAIL_TEMPLATES, emailNormalized: user.email_normalized, keyOf: normalizeEmail });
    }
    await tx.query(`DELETE FROM users WHERE id = $1 AND tenant_id = $2`, [userId, tenantId]);
    await this.events.auditAndOutbox(
      tx,
      {
        tenantId,
        type: 'user.deleted',
        actorType: 'dashboard_user',
        actorId: cmd.actor.userId,
        targetType: 'user',
        targetId: userId,
        severity: 'high',
        // counts only: never the address
        metadata: { was_anonymous: user.is_anonymous, sessions_ended: sessionIds.length, agent_actions_deleted: agentActions.rowCount, unsent_mails_dropped: mailsDropped },
      },
      { tenantId, topic: WEBHOOK_TOPIC, eventType: 'user.deleted', payload: { user_id: userId } },
    );
    return { sessionIds, throttled };
  }
}
