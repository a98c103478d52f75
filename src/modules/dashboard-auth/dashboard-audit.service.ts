import { Injectable } from '@nestjs/common';
import { ClientInfoValue } from '../../shared/auth/auth-context';
import { Queryable } from '../../shared/db/db.service';
import { EventsService } from '../../shared/events/events.service';
import { FailureAudit } from '../../shared/events/failure-audit';

/** Where a dashboard account's password was checked. */
export type DashboardPasswordFlow = 'login' | 'invite_accept';

/**
 * The audit events of dashboard sign-in, re-authentication and sign-out (tenant_id null: a
 * dashboard account belongs to no one tenant), in the style of `dashboard.signed_in`: actor the
 * dashboard user, the client as keyed hash prefixes (ClientHasher), never the address or agent.
 *
 * Failed password checks are recorded at most once per account and LOGIN_FAILURE_WINDOW_SECONDS
 * (FailureAudit); refusals of the throttle itself (429 auth/login_throttled) judge no password
 * and write nothing.
 */
@Injectable()
export class DashboardAudit {
  constructor(
    private readonly events: EventsService,
    private readonly failures: FailureAudit,
  ) {}

  /** `ip_hash_prefix` and `user_agent_hash_prefix` of a request (null when absent). */
  client(client: ClientInfoValue): { ip_hash_prefix: string | null; user_agent_hash_prefix: string | null } {
    return this.failures.client(client);
  }

  /**
   * `dashboard.signed_in`, in the sign-in's transaction (with the account's last_login_at): a
   * login, or (`flow` invite_accept) an invitation accepted with an existing account's password.
   */
  async signedIn(tx: Queryable, userId: string, client: ClientInfoValue, flow?: 'invite_accept'): Promise<void> {
    await tx.query(`UPDATE dashboard_users SET last_login_at = now() WHERE id = $1`, [userId]);
    await this.events.audit(tx, {
      tenantId: null, type: 'dashboard.signed_in', actorType: 'dashboard_user', actorId: userId, targetType: 'dashboard_user', targetId: userId,
      metadata: { method: 'password', ...(flow ? { flow } : {}), ...this.client(client) },
    });
  }

  /**
   * `dashboard.sign_in_failed` for a wrong password given for the account of `emailKey` (its id,
   * or undefined when the address has no account): the first of the window only (see above).
   */
  async signInFailed(emailKey: string, userId: string | undefined, flow: DashboardPasswordFlow, client: ClientInfoValue): Promise<void> {
    // the actor is whoever typed the password: not (yet) the account's user
    await this.failures.firstOfWindow(
      'dashboard-sign-in-failed',
      this.failures.accountKey('dashboard', emailKey),
      userId === undefined ? undefined : {
        tenantId: null, type: 'dashboard.sign_in_failed', severity: 'medium', actorType: 'anonymous', targetType: 'dashboard_user', targetId: userId,
        metadata: { method: 'password', flow, ...this.client(client) },
      },
    );
  }

  /** `dashboard.reauthenticated`, in the transaction that marks the session. */
  async reauthenticated(tx: Queryable, userId: string, sessionId: string, client: ClientInfoValue): Promise<void> {
    await this.events.audit(tx, {
      tenantId: null, type: 'dashboard.reauthenticated', actorType: 'dashboard_user', actorId: userId, targetType: 'dashboard_session', targetId: sessionId,
      metadata: { method: 'password', ...this.client(client) },
    });
  }

  /** `dashboard.reauth_failed`: a wrong password on a live session, the first of the window only (per account). */
  async reauthFailed(userId: string, sessionId: string, client: ClientInfoValue): Promise<void> {
    await this.failures.firstOfWindow('dashboard-reauth-failed', `acct:${userId}`, {
      tenantId: null, type: 'dashboard.reauth_failed', severity: 'medium', actorType: 'dashboard_user', actorId: userId, targetType: 'dashboard_session', targetId: sessionId,
      metadata: { method: 'password', ...this.client(client) },
    });
  }

  /** `dashboard.signed_out`, in the transaction that ends the session. */
  async signedOut(tx: Queryable, userId: string, sessionId: string, client: ClientInfoValue): Promise<void> {
    await this.events.audit(tx, {
      tenantId: null, type: 'dashboard.signed_out', actorType: 'dashboard_user', actorId: userId, targetType: 'dashboard_session', targetId: sessionId,
      metadata: this.client(client),
    });
  }

  /**
   * `dashboard.account_deleted` (high severity), in the erasure's transaction: the account erased
   * by its own user (GDPR Art. 17). Ids, counts and the client's keyed hash prefixes only: never
   * the address, which is what was erased.
   */
  async accountDeleted(tx: Queryable, userId: string, sessionId: string, counts: { tenants_left: number; sessions_ended: number; unsent_mails_dropped: number }, client: ClientInfoValue): Promise<void> {
    await this.events.audit(tx, {
      tenantId: null, type: 'dashboard.account_deleted', severity: 'high', actorType: 'dashboard_user', actorId: userId, targetType: 'dashboard_user', targetId: userId,
      metadata: { session_id: sessionId, ...counts, ...this.client(client) },
    });
  }

}
