import { CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import { UserProfileCache } from '../../../shared/cache/user-profile.cache';
import { Db, isUniqueViolation } from '../../../shared/db/db.service';
import { AppError, InvalidTokenError, tenantMismatch } from '../../../shared/errors/app-error';
import { EventsService } from '../../../shared/events/events.service';
import { activityCtes } from '../../sessions/activity.sql';
import { SessionsService, TokenResponse } from '../../sessions/sessions.service';
import { UserEmailPolicy } from '../user-email-policy.service';
import { LoginPolicy } from '../login-policy.service';
import { ClaimGuestCommand } from './claim-guest.command';

/**
 * spec 3.1: the guest gains email and password, is_anonymous becomes false, the user id and the
 * session continue. The update is conditional on is_anonymous, so of two parallel claims exactly
 * one wins; an email another user has rolls everything back (409 user/email_exists).
 */
@CommandHandler(ClaimGuestCommand)
export class ClaimGuestHandler implements ICommandHandler<ClaimGuestCommand, TokenResponse> {
  constructor(
    private readonly db: Db,
    private readonly events: EventsService,
    private readonly sessions: SessionsService,
    private readonly emailPolicy: UserEmailPolicy,
    private readonly profiles: UserProfileCache,
    private readonly loginPolicy: LoginPolicy,
  ) {}

  async execute(cmd: ClaimGuestCommand): Promise<TokenResponse> {
    const { guest, credentials: c } = cmd;
    if (guest.tenantId !== cmd.tenantId) throw tenantMismatch();
    if (!guest.isAnonymous) throw new AppError('anonymous/already_claimed', 'The bearer token is not a guest token');
    const amr = [c.method === 'password' ? 'pwd' : c.method]; // RFC 8176 names
    // spec 2.8 mfa_policy required: the account begins now (a guest could not enroll), so the whole
    // grace starts at the claim; read before the transaction, which then holds one connection only
    const opts = { amr, extraClaims: await this.loginPolicy.forNewAccount({ id: guest.userId, tenant_id: cmd.tenantId }, amr) };
    try {
      const tokens = await this.db.tx(async (tx) => {
        // the guest's session first (as refresh takes it): a refresh in flight commits before the
        // claim goes on, and none can rotate the guest token once the claim has begun
        if (guest.sessionId) await this.sessions.lockSession(tx, guest.sessionId);
        const [user] = await tx.query<{ id: string; role: string; created_at: Date; user_scopes: string; email_verified: boolean; tenant_name: string }>(
          `UPDATE users u SET email = $3, email_normalized = $4, password_hash = COALESCE($5, u.password_hash), password_proven = CASE WHEN $5::text IS NULL THEN u.password_proven ELSE false END,
                  date_of_birth_enc = COALESCE($6, u.date_of_birth_enc), email_verified = $7, is_anonymous = false,
                  claimed_at = now(), consent_at = now(), updated_at = now(),
                  role = t.default_user_role
             FROM tenants t
            WHERE u.id = $1 AND u.tenant_id = $2 AND t.id = u.tenant_id AND u.is_anonymous
              -- spec 3.1: once the API key that created the guest is revoked its session cannot be
              -- refreshed, so it cannot be claimed into a lasting one either
              AND NOT EXISTS (SELECT 1 FROM api_keys k WHERE k.id = u.created_by_api_key_id AND k.revoked_at IS NOT NULL)
            RETURNING u.id, u.role, u.created_at, t.user_scopes, u.email_verified, t.name AS tenant_name`,
          [guest.userId, cmd.tenantId, c.email, c.emailNormalized, c.passwordHash, c.dateOfBirthEnc, c.emailVerified ?? false],
        );
        if (!user) {
          const [row] = await tx.query<{ is_anonymous: boolean }>(`SELECT is_anonymous FROM users WHERE id = $1 AND tenant_id = $2`, [guest.userId, cmd.tenantId]);
          if (row && !row.is_anonymous) throw new AppError('anonymous/already_claimed');
          if (row) throw new InvalidTokenError('invalid_token', 'The guest session has ended (the API key that created it was revoked); register without the guest token');
          throw new InvalidTokenError('invalid_token', 'The guest no longer exists; sign in again');
        }
        // a claim is a sign-in: it stamps the sign-in and counts the user in this month's active
        // users (a guest last seen in an earlier month is counted again now, as registration counts)
        await tx.query(`WITH ${activityCtes('$1', { signIn: true })} SELECT 1`, [user.id], 'claim_touch');
        const audit = {
          tenantId: cmd.tenantId,
          type: 'user.claimed',
          actorType: 'user' as const,
          actorId: user.id,
          targetType: 'user',
          targetId: user.id,
          metadata: { method: c.method },
        };
        await this.events.auditAndOutbox(tx, audit, {
          tenantId: cmd.tenantId,
          topic: 'webhook',
          eventType: 'user.claimed',
          payload: { user_id: user.id, method: c.method, claimed_at: new Date().toISOString() },
        });
        // a password claim is a registration: the address still has to be verified (mail in this transaction)
        if (!user.email_verified) await this.emailPolicy.afterRegister(tx, { tenantId: cmd.tenantId, tenantName: user.tenant_name, userId: user.id, email: c.email });
        const sessionUser = {
          id: user.id,
          tenant_id: cmd.tenantId,
          email: c.email,
          email_verified: user.email_verified,
          is_anonymous: false,
          role: user.role,
          created_at: user.created_at,
        };
        return guest.sessionId
          ? this.sessions.continueSession(tx, sessionUser, user.user_scopes, guest.sessionId, opts)
          : this.sessions.start(tx, sessionUser, user.user_scopes, opts).then(({ sessionId: _s, ...t }) => t);
      });
      await this.profiles.invalidate([guest.userId]);
      return tokens;
    } catch (e) {
      if (isUniqueViolation(e)) throw new AppError('user/email_exists');
      throw e;
    }
  }
}
