import { PasswordHasher } from '../../shared/crypto/password-hasher';
import { Queryable } from '../../shared/db/db.service';
import { AppError } from '../../shared/errors/app-error';

/**
 * In the transaction that signs a dashboard account in (login, an invitation accepted with the
 * account's password): locks the account's row and checks that the password judged before the
 * transaction is still the account's. A password reset that committed in between ends every
 * session of the account; without this, a sign-in with the old password judged just before it
 * would open a session after it. A hash changed only by a parallel sign-in's re-hash still holds
 * the same password (verified again, in that rare case only).
 */
export async function lockAccountWithPassword(tx: Queryable, hasher: PasswordHasher, userId: string, judgedHash: string, password: string): Promise<void> {
  const [cur] = await tx.query<{ password_hash: string }>(`SELECT password_hash FROM dashboard_users WHERE id = $1 FOR NO KEY UPDATE`, [userId], 'dashboard_account_lock');
  if (cur && (cur.password_hash === judgedHash || (await hasher.verify(cur.password_hash, password)))) return;
  throw new AppError('auth/invalid_credentials');
}
