import { Injectable } from '@nestjs/common';
import { ClientInfoValue, UserPrincipal } from '../../shared/auth/auth-context';
import { PasswordHasher } from '../../shared/crypto/password-hasher';
import { Db, Queryable } from '../../shared/db/db.service';
import { AppError } from '../../shared/errors/app-error';
import { LoginThrottleService } from '../../shared/rate-limit/login-throttle.service';
import { MfaFactorsService, MfaMethod } from './mfa-factors.service';
import { mfaThrottleRealm } from './mfa-throttle';

class WrongCode extends Error {}

/**
 * The proof MFA disable and recovery-code regeneration need (spec 2.2 MfaDisableRequest,
 * MfaRegenerateCodesRequest): the account password and a valid code of the enabled factor. The
 * code is accepted in the same transaction as the change, so a failed change does not burn it.
 * Wrong passwords and codes count in the kernel's failed-credential throttle (429 once exceeded).
 */
@Injectable()
export class MfaConfirmationService {
  constructor(
    private readonly db: Db,
    private readonly hasher: PasswordHasher,
    private readonly factors: MfaFactorsService,
    private readonly throttle: LoginThrottleService,
  ) {}

  async run<T>(
    user: UserPrincipal,
    proof: { password: string; code: string; allowRecovery: boolean },
    client: ClientInfoValue,
    change: (tx: Queryable, method: MfaMethod) => Promise<T>,
  ): Promise<T> {
    if (user.claims.act) throw new AppError('auth/forbidden', 'Delegated (agent) tokens cannot manage MFA');
    const realm = mfaThrottleRealm(user.tenantId);
    await this.throttle.attempt(realm, user.userId, client.ip);
    const [row] = await this.db.query<{ password_hash: string | null; mfa_enabled: boolean }>(
      `SELECT u.password_hash,
              EXISTS (SELECT 1 FROM user_mfa_factors f WHERE f.user_id = u.id AND f.enabled_at IS NOT NULL) AS mfa_enabled
         FROM users u WHERE u.id = $1 AND u.tenant_id = $2`,
      [user.userId, user.tenantId],
    );
    if (!row?.mfa_enabled) {
      await this.throttle.release(realm, user.userId, client.ip);
      throw new AppError('mfa/not_enabled');
    }
    const passwordOk = row.password_hash ? await this.hasher.verify(row.password_hash, proof.password) : await this.hasher.verifyDummy(proof.password);
    if (!passwordOk) {
      throw new AppError('auth/invalid_credentials', 'The password is wrong');
    }
    try {
      const result = await this.db.tx(async (tx) => {
        const method = await this.factors.verify(tx, user.tenantId, user.userId, proof.code, proof.allowRecovery);
        if (!method) throw new WrongCode();
        return change(tx, method);
      });
      await this.throttle.succeeded(realm, user.userId, client.ip);
      return result;
    } catch (e) {
      if (!(e instanceof WrongCode)) throw e;
      throw new AppError('mfa/invalid_code');
    }
  }
}
