import { CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import { TokenRevocationService } from '../../../shared/auth/token-revocation.service';
import { Db } from '../../../shared/db/db.service';
import { AppError } from '../../../shared/errors/app-error';
import { EventsService } from '../../../shared/events/events.service';
import { SessionsService } from '../../sessions/sessions.service';
import { LogoutCommand } from './logout.command';

@CommandHandler(LogoutCommand)
export class LogoutHandler implements ICommandHandler<LogoutCommand, void> {
  constructor(
    private readonly db: Db,
    private readonly sessions: SessionsService,
    private readonly events: EventsService,
    private readonly revocation: TokenRevocationService,
  ) {}

  async execute({ user, scope }: LogoutCommand): Promise<void> {
    // an agent token has no session: a 204 would tell the agent something ended while its token
    // keeps working, so it is refused and pointed to the endpoint that does end it
    if (user.claims.act) throw new AppError('auth/forbidden', 'Agent tokens have no session to end; revoke the token at /oauth/revoke (RFC 7009)');
    if (scope !== 'local') return this.endUserSessions(user, scope);
    if (!user.sessionId) return;
    const sid = user.sessionId;
    await this.db.tx(async (tx) => {
      const ended = await this.sessions.revokeSession(sid, 'logout', tx);
      if (ended)
        await this.events.audit(tx, { tenantId: user.tenantId, type: 'user.signed_out', actorType: 'user', actorId: user.userId, targetType: 'session', targetId: sid });
    });
    await this.revocation.markSessionsRevoked([sid]);
  }

  /**
   * `global` and `others`: the user's sessions end in one transaction with one audit event (the
   * scope and how many ended), then their access tokens are refused (after the commit, as every
   * revocation: see TokenRevocationService).
   */
  private async endUserSessions(user: LogoutCommand['user'], scope: 'global' | 'others'): Promise<void> {
    const keep = scope === 'others' ? user.sessionId : undefined;
    const ended = await this.db.tx(async (tx) => {
      const ids = await this.sessions.revokeUserSessions(tx, user.userId, scope === 'global' ? 'logout_global' : 'logout_others', keep);
      if (ids.length)
        await this.events.audit(tx, {
          tenantId: user.tenantId,
          type: 'user.signed_out',
          actorType: 'user',
          actorId: user.userId,
          targetType: 'user',
          targetId: user.userId,
          metadata: { scope, sessions_ended: ids.length },
        });
      return ids;
    });
    await this.revocation.markSessionsRevoked(ended);
  }
}
