import { CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import { TokenRevocationService } from '../../../shared/auth/token-revocation.service';
import { Db } from '../../../shared/db/db.service';
import { insufficientScope } from '../../../shared/errors/app-error';
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

  /**
   * `local` ends the bearer's session; `global` every session of the user; `others` all but the
   * bearer's. The sessions end in one transaction with one audit event, then their access tokens
   * are refused (after the commit, as every revocation: see TokenRevocationService).
   */
  async execute({ user, scope }: LogoutCommand): Promise<void> {
    // an agent token has no session: a 204 would tell the agent something ended while its token
    // keeps working, so it is refused and pointed to the endpoint that does end it
    if (user.claims.act) throw insufficientScope('Agent tokens have no session to end; revoke the token at /oauth/revoke (RFC 7009)');
    const sid = user.sessionId;
    if (scope === 'local' && !sid) return;
    const ended = await this.db.tx(async (tx) => {
      if (scope === 'local') {
        if (await this.sessions.revokeSession(sid!, 'logout', tx))
          await this.events.audit(tx, { tenantId: user.tenantId, type: 'user.signed_out', actorType: 'user', actorId: user.userId, targetType: 'session', targetId: sid });
        // marked again even when it had ended already: a Redis write lost then is made good
        return [sid!];
      }
      const ids = await this.sessions.revokeUserSessions(tx, user.userId, `logout_${scope}`, scope === 'others' ? sid : undefined);
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
      // and those of the user's sessions ended earlier whose access tokens may still be live: a
      // logout retried after its marks failed (503) marks them again
      const earlier = await tx.query<{ id: string }>(
        `SELECT id FROM user_sessions WHERE user_id = $1 AND revoked_at > now() - make_interval(secs => $2) AND ($3::uuid IS NULL OR id <> $3)`,
        [user.userId, this.revocation.ttlSeconds, scope === 'others' ? sid : null],
      );
      return [...new Set([...ids, ...earlier.map((r) => r.id)])];
    });
    await this.revocation.markSessionsRevoked(ended);
  }
}
