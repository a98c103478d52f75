import { Command, CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import { DashboardPrincipal } from '../../shared/auth/auth-context';
import { DashboardSessionService } from '../../shared/auth/dashboard-session.service';
import { PasswordHasher } from '../../shared/crypto/password-hasher';
import { Db } from '../../shared/db/db.service';
import { AppError } from '../../shared/errors/app-error';
import { LoginThrottleService } from '../../shared/rate-limit/login-throttle.service';
import { normalizeEmail } from '../users/email';

/** spec 2.7 DashboardReauth: confirms the password; sensitive actions need a recent one. */
export class DashboardReauthCommand extends Command<{ verified_at: string }> {
  constructor(
    readonly session: DashboardPrincipal,
    readonly password: string,
    readonly ip: string,
  ) {
    super();
  }
}

@CommandHandler(DashboardReauthCommand)
export class DashboardReauthHandler implements ICommandHandler<DashboardReauthCommand, { verified_at: string }> {
  constructor(
    private readonly db: Db,
    private readonly hasher: PasswordHasher,
    private readonly sessions: DashboardSessionService,
    private readonly throttle: LoginThrottleService,
  ) {}

  async execute(cmd: DashboardReauthCommand): Promise<{ verified_at: string }> {
    const email = normalizeEmail(cmd.session.email);
    const ok = await this.throttle.judge('dashboard', email, cmd.ip, async () => {
      const [u] = await this.db.query<{ password_hash: string }>(`SELECT password_hash FROM dashboard_users WHERE id = $1`, [cmd.session.userId]);
      return !!u && (await this.hasher.verify(u.password_hash, cmd.password));
    });
    if (!ok) {
      throw new AppError('auth/invalid_credentials', 'The password is not correct');
    }
    const at = await this.sessions.markReauthenticated(cmd.session.sessionId);
    return { verified_at: at.toISOString() };
  }
}
