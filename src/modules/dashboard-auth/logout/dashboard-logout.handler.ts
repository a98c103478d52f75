import { CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import { DashboardSessionService } from '../../../shared/auth/dashboard-session.service';
import { Db } from '../../../shared/db/db.service';
import { DashboardAudit } from '../dashboard-audit.service';
import { DashboardLogoutCommand } from './dashboard-logout.command';

@CommandHandler(DashboardLogoutCommand)
export class DashboardLogoutHandler implements ICommandHandler<DashboardLogoutCommand, void> {
  constructor(
    private readonly db: Db,
    private readonly sessions: DashboardSessionService,
    private readonly audit: DashboardAudit,
  ) {}

  /**
   * The session ends with its `dashboard.signed_out` event in one transaction; the conditional
   * update has one winner, so two logouts of one session at once write one event.
   */
  async execute({ session, client }: DashboardLogoutCommand): Promise<void> {
    await this.db.tx(async (tx) => {
      if (await this.sessions.revoke(tx, session.sessionId)) await this.audit.signedOut(tx, session.userId, session.sessionId, client);
    });
  }
}
