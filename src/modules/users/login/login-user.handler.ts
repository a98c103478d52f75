import { CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import { UserProfileCache } from '../../../shared/cache/user-profile.cache';
import { PasswordHasher } from '../../../shared/crypto/password-hasher';
import { Db } from '../../../shared/db/db.service';
import { AppError } from '../../../shared/errors/app-error';
import { countedSignIn } from '../../../shared/http/metrics';
import { EventsService } from '../../../shared/events/events.service';
import { FailureAudit } from '../../../shared/events/failure-audit';
import { LoginThrottleService, passwordSignInRealm } from '../../../shared/rate-limit/login-throttle.service';
import { SessionsService, TokenResponse } from '../../sessions/sessions.service';
import { normalizeEmail } from '../email';
import { activityCtes } from '../../sessions/activity.sql';
import { LoginPolicy, passwordUnchanged } from '../login-policy.service';
import { LoginUserCommand, MfaRequiredResponse } from './login-user.command';

interface UserRow {
  id: string;
  tenant_id: string;
  email: string;
  email_verified: boolean;
  password_hash: string | null;
  role: string;
  created_at: Date;
}

/**
 * Unknown email and wrong password answer the same 401 body after the same argon2 work (a dummy
 * verify), and count against the same throttles, so nothing tells them apart. A wrong password for
 * an account is audited `user.sign_in_failed` (medium), the first of each failure window per
 * account (FailureAudit: bounded rows; unknown addresses write none, with the same Redis work).
 */
@CommandHandler(LoginUserCommand)
export class LoginUserHandler implements ICommandHandler<LoginUserCommand, TokenResponse | MfaRequiredResponse> {
  constructor(
    private readonly db: Db,
    private readonly hasher: PasswordHasher,
    private readonly throttle: LoginThrottleService,
    private readonly sessions: SessionsService,
    private readonly events: EventsService,
    private readonly policy: LoginPolicy,
    private readonly profiles: UserProfileCache,
    private readonly failures: FailureAudit,
  ) {}

  /** Counted in authp_sign_ins_total{method="password"}. */
  execute(cmd: LoginUserCommand): Promise<TokenResponse | MfaRequiredResponse> {
    return countedSignIn('password', this.signIn(cmd));
  }

  private async signIn(cmd: LoginUserCommand): Promise<TokenResponse | MfaRequiredResponse> {
    const tenantId = cmd.apiKey.tenantId;
    const email = normalizeEmail(cmd.email);
    const realm = passwordSignInRealm(tenantId);
    const account: { id?: string } = {};
    const user = await this.throttle.judge(realm, email, cmd.client.ip, async () => {
      const [u] = await this.db.query<UserRow>(
        `SELECT id, tenant_id, email, email_verified, password_hash, role, created_at
           FROM users WHERE tenant_id = $1 AND email_normalized = $2`,
        [tenantId, email],
        'user_login_lookup',
      );
      account.id = u?.id;
      return (await this.hasher.verifyOrDummy(u?.password_hash, cmd.password)) && u;
    });
    if (!user) {
      // a password was judged wrong (a throttled attempt never gets here): audited as the
      // dashboard's, the first of each window per account (FailureAudit), never for an unknown address
      await this.failures.firstOfWindow(
        'user-sign-in-failed',
        this.failures.accountKey(realm, email),
        account.id === undefined
          ? undefined
          : {
              tenantId, type: 'user.sign_in_failed', severity: 'medium', actorType: 'anonymous', targetType: 'user', targetId: account.id,
              metadata: { method: 'password', ...this.failures.client(cmd.client) },
            },
      );
      throw new AppError('auth/invalid_credentials');
    }
    const passwordHashes = await this.storedHashesOf(user, cmd.password);
    const sessionUser = { ...user, is_anonymous: false };
    // MFA and the tenant's MFA policy (account-security module) may answer a challenge instead
    const decision = await this.policy.afterPassword(sessionUser, { amr: ['pwd'], passwordHashes });
    if (decision.challenge) return decision.challenge;
    const tokens = await this.db.tx(async (tx) => {
      // the password checked above must still be the account's: a reset or change (or a first
      // passwordless sign-in clearing a squatter's password) committed since then ends every session
      // of the old password, and this one would start after it. The row stays locked to the end, so
      // one still running waits for this session and then ends it too.
      if (!(await passwordUnchanged(tx, user.id, passwordHashes))) throw new AppError('auth/invalid_credentials');
      await tx.query(`WITH ${activityCtes('$1', { signIn: true })} SELECT 1`, [user.id], 'user_login_touch');
      await this.events.audit(tx, {
        tenantId,
        type: 'user.signed_in',
        actorType: 'user',
        actorId: user.id,
        targetType: 'user',
        targetId: user.id,
        metadata: { method: 'password' },
      });
      const { sessionId: _s, ...tokens } = await this.sessions.start(tx, sessionUser, cmd.apiKey.tenant.userScopes, {
        amr: ['pwd'],
        apiKeyId: cmd.apiKey.id,
        extraClaims: decision.extraClaims,
      });
      return tokens;
    });
    await this.profiles.invalidate([user.id]); // last_sign_in_at
    return tokens;
  }

  /**
   * The stored hashes the password was verified against, for the recheck where the session or
   * challenge starts: the one read, and its upgrade when the hash was made with an older
   * configuration. Parallel sign-ins of the same password each make an upgrade (its own salt) and
   * only one is stored: the others verify the password against the stored winner (one more argon2
   * verify, in that race only) instead of failing the recheck. A password changed meanwhile fails it.
   */
  private async storedHashesOf(user: UserRow, password: string): Promise<string[]> {
    const read = user.password_hash!;
    const upgraded = await this.hasher.rehashIfNeeded(read, password);
    if (!upgraded) return [read];
    const { rowCount } = await this.db.exec(`UPDATE users SET password_hash = $2 WHERE id = $1 AND password_hash = $3`, [user.id, upgraded, read]);
    if (rowCount) return [read, upgraded];
    const [now] = await this.db.query<{ password_hash: string | null }>(`SELECT password_hash FROM users WHERE id = $1`, [user.id]);
    return now?.password_hash && (await this.hasher.verify(now.password_hash, password)) ? [read, now.password_hash] : [read];
  }
}
