import { Inject, Injectable } from '@nestjs/common';
import { APP_CONFIG, AppConfig } from '../../config/config';
import { ClientInfoValue } from '../auth/auth-context';
import { ClientHasher } from '../crypto/client-hash';
import { Db } from '../db/db.service';
import { RateLimitService } from '../rate-limit/rate-limit.service';
import { AuditEvent, EventsService } from './events.service';

/** Never reached: the counters below only count, they never refuse. */
const COUNT_ONLY = 2 ** 31;

/**
 * The audit events of failed credential checks (a wrong password), recorded at most once per
 * account and LOGIN_FAILURE_WINDOW_SECONDS: the first failure of each window, counted in Redis as
 * other "once per window" events are, so failures cannot be turned into audit rows without bound
 * (the login throttle still counts every one). A failure for an address without an account writes
 * nothing (there is no account to attach it to, and rows for made-up addresses would again be
 * unbounded); its window is counted all the same, so known and unknown addresses do the same
 * Redis work. Used by the dashboard (`dashboard.sign_in_failed`, `dashboard.reauth_failed`) and
 * end users (`user.sign_in_failed`, `user.reauth_failed`).
 */
@Injectable()
export class FailureAudit {
  constructor(
    private readonly db: Db,
    private readonly events: EventsService,
    private readonly hasher: ClientHasher,
    private readonly limiter: RateLimitService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  /** `ip_hash_prefix` and `user_agent_hash_prefix` of a request (null when absent): never the address or agent. */
  client(client: ClientInfoValue): { ip_hash_prefix: string | null; user_agent_hash_prefix: string | null } {
    return { ip_hash_prefix: this.hasher.optional(client.ip), user_agent_hash_prefix: this.hasher.optional(client.userAgent) };
  }

  /**
   * Writes `event` (its own statement) when this is the first failure of `account`'s window in
   * `bucket` (`account`: a keyed hash or an id, never an address); nothing for a later one, nor
   * when `event` is undefined (no such account), whose window is counted all the same.
   */
  async firstOfWindow(bucket: string, account: string, event: AuditEvent | undefined): Promise<void> {
    const first = (await this.limiter.hit(bucket, account, COUNT_ONLY, this.config.LOGIN_FAILURE_WINDOW_SECONDS)).count === 1;
    if (first && event) await this.events.audit(this.db, event);
  }

  /**
   * `user.reauth_failed`: a wrong password from the holder of a live end-user token (a password
   * change's current password, a step-up, an MFA change's confirmation), the end user's
   * `dashboard.reauth_failed`: a stolen token guessing the password to take the account over
   * leaves a trail. The first of each failure window per account.
   */
  async userReauthFailed(tenantId: string, userId: string, flow: 'password_change' | 'step_up' | 'mfa_change', client: ClientInfoValue): Promise<void> {
    await this.firstOfWindow('user-reauth-failed', `acct:${userId}`, {
      tenantId, type: 'user.reauth_failed', severity: 'medium', actorType: 'user', actorId: userId, targetType: 'user', targetId: userId,
      metadata: { method: 'password', flow, ...this.client(client) },
    });
  }

  /** The keyed hash naming an account of a realm in a bucket's key (the address never reaches Redis). */
  accountKey(realm: string, account: string): string {
    return `acct:${this.hasher.subject(`${realm}:${account}`)}`;
  }
}
