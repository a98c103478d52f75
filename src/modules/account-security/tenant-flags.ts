import { Injectable } from '@nestjs/common';
import { Db, Queryable } from '../../shared/db/db.service';
import { AppError } from '../../shared/errors/app-error';

export interface PasswordlessFlags {
  magic_link_enabled: boolean;
  email_otp_enabled: boolean;
  email_otp_captcha_required: boolean;
}

/** Contract: magic link and email OTP are off until the tenant enables them in settings/security. */
@Injectable()
export class TenantFlags {
  constructor(private readonly db: Db) {}

  /** The switches; with `lockIn`, read in that transaction under a share lock of the tenant's row (see hold). */
  async get(tenantId: string, lockIn?: Queryable): Promise<PasswordlessFlags> {
    const sql = `SELECT magic_link_enabled, email_otp_enabled, email_otp_captcha_required FROM tenants WHERE id = $1`;
    const [f] = lockIn
      ? await lockIn.query<PasswordlessFlags>(`${sql} FOR SHARE`, [tenantId])
      : await this.db.query<PasswordlessFlags>(sql, [tenantId], 'tenant_passwordless_flags');
    if (!f) throw new AppError('auth/invalid_api_key');
    return f;
  }

  async requireMagicLink(tenantId: string, lockIn?: Queryable): Promise<PasswordlessFlags> {
    const f = await this.get(tenantId, lockIn);
    if (!f.magic_link_enabled) throw new AppError('magic_link/disabled', 'Magic link sign-in is not enabled for this application');
    return f;
  }

  async requireEmailOtp(tenantId: string, lockIn?: Queryable): Promise<PasswordlessFlags> {
    const f = await this.get(tenantId, lockIn);
    if (!f.email_otp_enabled) throw new AppError('email_otp/disabled', 'Email code sign-in is not enabled for this application');
    return f;
  }

  /** The same switch for a step-up by link or code: a method the tenant has off is off for step-up too. */
  async requireChannel(tenantId: string, channel: 'magic_link' | 'email_otp', lockIn?: Queryable): Promise<PasswordlessFlags> {
    return channel === 'magic_link' ? this.requireMagicLink(tenantId, lockIn) : this.requireEmailOtp(tenantId, lockIn);
  }

  /**
   * In the transaction that writes a link or code of `channel`: the switch read again under a share
   * lock of the tenant's row. A switch-off (settings PATCH: the row locked, then what is outstanding
   * voided) then waits for this write and voids it, or this write sees the switch off (the same
   * refusal). Read before it without the lock, the switch could go off between the read and the
   * write, and a link written after the voiding signed in once the method was switched on again.
   */
  async hold(tx: Queryable, tenantId: string, channel: 'magic_link' | 'email_otp'): Promise<void> {
    await this.requireChannel(tenantId, channel, tx);
  }
}
