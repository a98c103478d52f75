import { Inject, Injectable } from '@nestjs/common';
import { APP_CONFIG, AppConfig } from '../../config/config';
import { ClientInfoValue, UserPrincipal } from '../../shared/auth/auth-context';
import { PasswordHasher } from '../../shared/crypto/password-hasher';
import { Db, Queryable } from '../../shared/db/db.service';
import { AppError, insufficientScope } from '../../shared/errors/app-error';
import { LoginThrottleService, passwordSignInRealm } from '../../shared/rate-limit/login-throttle.service';
import { MfaFactorsService, MfaMethod } from './mfa-factors.service';
import { mfaThrottleLimits, mfaThrottleRealm } from './mfa-throttle';
import { FailureAudit } from '../../shared/events/failure-audit';

class WrongCode extends Error {}

/**
 * The proof MFA disable and recovery-code regeneration need (spec 2.2 MfaDisableRequest,
 * MfaRegenerateCodesRequest): the account password and a valid code of the enabled factor. The
 * code is accepted in the same transaction as the change, so a failed change does not burn it.
 * A wrong password counts in the failed-credential throttle of password login of that account
 * (realm `user:<tenant>`, as step-up and password change), so these endpoints cannot be used to
 * go on guessing the password once sign-in is throttled; a wrong code counts in the MFA realm,
 * as at sign-in. Either answers 429 once exceeded.
 */
@Injectable()
export class MfaConfirmationService {
  constructor(
    private readonly db: Db,
    private readonly hasher: PasswordHasher,
    private readonly factors: MfaFactorsService,
    private readonly throttle: LoginThrottleService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly failures: FailureAudit,
  ) {}

  async run<T>(
    user: UserPrincipal,
    proof: { password: string; code: string; allowRecovery: boolean },
    client: ClientInfoValue,
    change: (tx: Queryable, method: MfaMethod) => Promise<T>,
  ): Promise<T> {
    if (user.claims.act) throw insufficientScope('Delegated (agent) tokens cannot manage MFA');
    // as at enrollment: a guest has no password and no factor to manage
    if (user.isAnonymous) throw insufficientScope('Guests cannot manage MFA; register first');
    const [row] = await this.db.query<{ password_hash: string | null; email_normalized: string | null; mfa_enabled: boolean }>(
      `SELECT u.password_hash, u.email_normalized,
              EXISTS (SELECT 1 FROM user_mfa_factors f WHERE f.user_id = u.id AND f.enabled_at IS NOT NULL) AS mfa_enabled
         FROM users u WHERE u.id = $1 AND u.tenant_id = $2`,
      [user.userId, user.tenantId],
    );
    // nothing judged yet: no credential was checked, none is counted
    if (!row?.mfa_enabled) throw new AppError('mfa/not_enabled');
    const passwordRealm = passwordSignInRealm(user.tenantId);
    const account = row.email_normalized ?? user.userId;
    const passwordOk = await this.throttle.judge(passwordRealm, account, client.ip, () => this.hasher.verifyOrDummy(row.password_hash, proof.password));
    if (!passwordOk) {
      await this.failures.userReauthFailed(user.tenantId, user.userId, 'mfa_change', client);
      throw new AppError('auth/invalid_credentials', 'The password is wrong');
    }
    const codeRealm = mfaThrottleRealm(user.tenantId);
    await this.throttle.attempt(codeRealm, user.userId, client.ip, mfaThrottleLimits(this.config));
    try {
      const result = await this.db.tx(async (tx) => {
        const method = await this.factors.verify(tx, user.tenantId, user.userId, proof.code, proof.allowRecovery);
        if (!method) throw new WrongCode();
        return change(tx, method);
      });
      await this.throttle.succeeded(codeRealm, user.userId, client.ip);
      return result;
    } catch (e) {
      if (e instanceof WrongCode) {
        await this.throttle.failed(codeRealm, user.userId, client.ip);
        throw new AppError('mfa/invalid_code');
      }
      // the change failed for another reason (PostgreSQL unreachable, ...): the code was not judged
      await this.throttle.release(codeRealm, user.userId, client.ip);
      throw e;
    }
  }
}
