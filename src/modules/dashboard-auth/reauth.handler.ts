import { Command, CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import { ClientInfoValue, DashboardPrincipal } from '../../shared/auth/auth-context';
import { DashboardSessionService } from '../../shared/auth/dashboard-session.service';
import { PasswordHasher } from '../../shared/crypto/password-hasher';
import { Db } from '../../shared/db/db.service';
import { AppError } from '../../shared/errors/app-error';
import { LoginThrottleService } from '../../shared/rate-limit/login-throttle.service';
import { normalizeEmail } from '../users/email';
import { DashboardAudit } from './dashboard-audit.service';

/** spec 2.7 DashboardReauth: confirms the password; sensitive actions need a recent one. */
export class DashboardReauthCommand extends Command<{ verified_at: string }> {
  constructor(
    readonly session: DashboardPrincipal,
    readonly password: string,
    readonly client: ClientInfoValue,
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
    private readonly audit: DashboardAudit,
  ) {}

  async execute(cmd: DashboardReauthCommand): Promise<{ verified_at: string }> {
    const { session, client } = cmd;
    const email = normalizeEmail(session.email);
    const ok = await this.throttle.judge('dashboard', email, client.ip, async () => {
      const [u] = await this.db.query<{ password_hash: string }>(`SELECT password_hash FROM dashboard_users WHERE id = $1`, [session.userId]);
      return !!u && (await this.hasher.verify(u.password_hash, cmd.password));
    });
    if (!ok) {
      await this.audit.reauthFailed(session.userId, session.sessionId, client);
      throw new AppError('auth/invalid_credentials', 'The password is not correct');
    }
    // the session's mark and its audit event in one transaction (architecture rule 4)
    return this.db.tx(async (tx) => {
      const at = await this.sessions.markReauthenticated(tx, session.sessionId);
      // signed out meanwhile (another request of this session): nothing to confirm
      if (!at) throw new AppError('auth/unauthorized');
      await this.audit.reauthenticated(tx, session.userId, session.sessionId, client);
      return { verified_at: at.toISOString() };
    });
  }
}
