import { Injectable } from '@nestjs/common';
import { Queryable } from '../../shared/db/db.service';

/**
 * Where an email address enters for an end user (register, claim, OTP create): the tenant's
 * address policy and the follow-up mail. The account-security module fills in the domain
 * rules and the verification mail; registration calls this one seam.
 */
@Injectable()
export class UserEmailPolicy {
  private readonly checks: ((tenantId: string, email: string) => Promise<void>)[] = [];
  private readonly afterHooks: ((tx: Queryable, u: RegisteredUser) => Promise<void>)[] = [];

  registerCheck(check: (tenantId: string, email: string) => Promise<void>): void {
    this.checks.push(check);
  }

  registerAfterRegister(hook: (tx: Queryable, u: RegisteredUser) => Promise<void>): void {
    this.afterHooks.push(hook);
  }

  async assertAllowed(tenantId: string, email: string): Promise<void> {
    for (const c of this.checks) await c(tenantId, email);
  }

  async afterRegister(tx: Queryable, u: RegisteredUser): Promise<void> {
    for (const h of this.afterHooks) await h(tx, u);
  }
}

export interface RegisteredUser {
  tenantId: string;
  tenantName: string;
  userId: string;
  email: string;
}
