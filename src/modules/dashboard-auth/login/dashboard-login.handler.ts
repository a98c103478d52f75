import { CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import { DashboardSessionService } from '../../../shared/auth/dashboard-session.service';
import { PasswordHasher } from '../../../shared/crypto/password-hasher';
import { Db } from '../../../shared/db/db.service';
import { AppError } from '../../../shared/errors/app-error';
import { countedSignIn } from '../../../shared/http/metrics';
import { LoginThrottleService } from '../../../shared/rate-limit/login-throttle.service';
import { normalizeEmail } from '../../users/email';
import { DashboardAudit } from '../dashboard-audit.service';
import { DashboardMembershipsService } from '../dashboard-memberships.service';
import { lockAccountWithPassword } from '../password-still';
import { DashboardLoginCommand, DashboardLoginResult } from './dashboard-login.command';

@CommandHandler(DashboardLoginCommand)
export class DashboardLoginHandler implements ICommandHandler<DashboardLoginCommand, DashboardLoginResult> {
  constructor(
    private readonly db: Db,
    private readonly hasher: PasswordHasher,
    private readonly throttle: LoginThrottleService,
    private readonly sessions: DashboardSessionService,
    private readonly audit: DashboardAudit,
    private readonly memberships: DashboardMembershipsService,
  ) {}

  /** Counted in authp_sign_ins_total{method="dashboard"}. */
  execute(cmd: DashboardLoginCommand): Promise<DashboardLoginResult> {
    return countedSignIn('dashboard', this.signIn(cmd));
  }

  private async signIn(cmd: DashboardLoginCommand): Promise<DashboardLoginResult> {
    const email = normalizeEmail(cmd.email);
    const account: { id?: string } = {};
    const user = await this.throttle.judge('dashboard', email, cmd.client.ip, async () => {
      const [u] = await this.db.query<{ id: string; email: string; password_hash: string }>(
        `SELECT id, email, password_hash FROM dashboard_users WHERE email_normalized = $1`,
        [email],
      );
      account.id = u?.id;
      return (await this.hasher.verifyOrDummy(u?.password_hash, cmd.password)) && u;
    });
    if (!user) {
      // a password was judged wrong (a throttled attempt never gets here): bounded per account
      await this.audit.signInFailed(email, account.id, 'login', cmd.client);
      throw new AppError('auth/invalid_credentials');
    }
    const upgraded = await this.hasher.rehashIfNeeded(user.password_hash, cmd.password);
    return this.db.tx(async (tx) => {
      await lockAccountWithPassword(tx, this.hasher, user.id, user.password_hash, cmd.password);
      if (upgraded)
        await tx.query(`UPDATE dashboard_users SET password_hash = $2 WHERE id = $1 AND password_hash = $3`, [user.id, upgraded, user.password_hash]);
      await this.audit.signedIn(tx, user.id, cmd.client);
      const s = await this.sessions.create(tx, user.id);
      const memberships = await this.memberships.of(tx, user.id);
      return { body: { user: { id: user.id, email: user.email }, memberships, csrf_token: s.csrfToken }, sessionToken: s.token };
    });
  }
}
