import { Inject } from '@nestjs/common';
import { CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import Redis from 'ioredis';
import { APP_CONFIG, AppConfig } from '../../../config/config';
import { UserProfileCache } from '../../../shared/cache/user-profile.cache';
import { sha256Hex } from '../../../shared/crypto/tokens';
import { Db } from '../../../shared/db/db.service';
import { AppError } from '../../../shared/errors/app-error';
import { EventsService } from '../../../shared/events/events.service';
import { countedSignIn } from '../../../shared/http/metrics';
import { MailService } from '../../../shared/mail/mail.service';
import { LoginThrottleService } from '../../../shared/rate-limit/login-throttle.service';
import { REDIS } from '../../../shared/redis/redis.module';
import { AMR_EMAIL_OTP, AMR_MAGIC_LINK } from '../../account-security/account-security.constants';
import { activityCtes } from '../../sessions/activity.sql';
import { SessionsService, SessionUser } from '../../sessions/sessions.service';
import { MfaFactorsService } from '../mfa-factors.service';
import { MFA_CHALLENGE_MAX_ATTEMPTS } from '../mfa-login-policy.service';
import { noticeMfaSignInFailed } from '../mfa-notice';
import { mfaThrottleLimits, mfaThrottleRealm } from '../mfa-throttle';
import { MfaVerifyResponse, VerifyMfaLoginCommand } from './verify-mfa-login.command';

class WrongCode extends Error {}

/** Redis marker: the user was told of a failed second factor in this window. */
const noticeMarker = (userId: string) => `mfa-failed-notice:${userId}`;

/**
 * POST /v1/auth/mfa/verify. Unknown, expired, used, dead and other-tenant challenges answer the
 * same 401 mfa/invalid_challenge. Each evaluation first takes one of the challenge's 5 attempts
 * with a conditional update (so parallel guesses evaluate at most 5), then one of the failed
 * second-factor throttle's (an attempt it refuses has still used the challenge's), then, in one transaction,
 * marks the challenge used (one winner), accepts the code (TOTP once per time step, or a recovery
 * code once) and starts an AAL2 session; a wrong code rolls that back, leaving the challenge to its
 * remaining attempts. Failures also count in the kernel's failed-credential throttle per user.
 */
@CommandHandler(VerifyMfaLoginCommand)
export class VerifyMfaLoginHandler implements ICommandHandler<VerifyMfaLoginCommand, MfaVerifyResponse> {
  constructor(
    private readonly db: Db,
    private readonly factors: MfaFactorsService,
    private readonly sessions: SessionsService,
    private readonly events: EventsService,
    private readonly throttle: LoginThrottleService,
    private readonly profiles: UserProfileCache,
    private readonly mail: MailService,
    @Inject(REDIS) private readonly redis: Redis,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  /** Counted in authp_sign_ins_total{method="mfa"}: the second step of a sign-in. */
  execute(cmd: VerifyMfaLoginCommand): Promise<MfaVerifyResponse> {
    return countedSignIn('mfa', this.verify(cmd));
  }

  private async verify(cmd: VerifyMfaLoginCommand): Promise<MfaVerifyResponse> {
    const tenantId = cmd.apiKey.tenantId;
    const tokenHash = sha256Hex(cmd.challengeToken);
    const [challenge] = await this.db.query<{ id: string; user_id: string; first_factor_amr: string[]; oauth_params: Record<string, string> | null; method_off: boolean }>(
      `SELECT c.id, c.user_id, c.first_factor_amr, c.oauth_params,
              (c.first_factor_amr = $4::text[] AND NOT t.magic_link_enabled) OR (c.first_factor_amr = $5::text[] AND NOT t.email_otp_enabled) AS method_off
         FROM mfa_challenges c JOIN tenants t ON t.id = c.tenant_id
        WHERE c.token_hash = $1 AND c.tenant_id = $2 AND c.kind = 'login' AND c.used_at IS NULL AND c.expires_at > now() AND c.attempts < $3`,
      [tokenHash, tenantId, MFA_CHALLENGE_MAX_ATTEMPTS, AMR_MAGIC_LINK, AMR_EMAIL_OTP],
      'mfa_challenge_find',
    );
    if (!challenge) throw new AppError('mfa/invalid_challenge');
    // a challenge opened by a magic link or an email code dies once the tenant switched that method
    // off (the switch voids those pending then; this one a sign-in made just after): used up here,
    // so switching the method on again does not bring it back
    if (challenge.method_off) {
      await this.db.query(`UPDATE mfa_challenges SET used_at = now() WHERE id = $1 AND used_at IS NULL`, [challenge.id]);
      throw new AppError('mfa/invalid_challenge');
    }
    // one of the challenge's attempts first: of parallel guesses on one challenge, only the 5 that
    // took one go on (the others: used or ended meanwhile, nothing counted), then the throttle
    const [claimed] = await this.db.query<{ attempts: number }>(
      `UPDATE mfa_challenges SET attempts = attempts + 1
        WHERE id = $1 AND used_at IS NULL AND expires_at > now() AND attempts < $2 RETURNING attempts`,
      [challenge.id, MFA_CHALLENGE_MAX_ATTEMPTS],
      'mfa_challenge_attempt',
    );
    if (!claimed) throw new AppError('mfa/invalid_challenge');
    const realm = mfaThrottleRealm(tenantId);
    await this.throttle.attempt(realm, challenge.user_id, cmd.client.ip, mfaThrottleLimits(this.config));

    try {
      const tokens = await this.db.tx(async (tx) => {
        // the user's row before the challenge: a password reset or change locks the user's row and
        // then deletes the user's challenges, so taking the challenge first deadlocked with it
        await tx.query(`SELECT 1 FROM users WHERE id = $1 FOR NO KEY UPDATE`, [challenge.user_id], 'mfa_verify_user_lock');
        const won = await tx.query(`UPDATE mfa_challenges SET used_at = now() WHERE id = $1 AND used_at IS NULL RETURNING id`, [challenge.id]);
        if (!won.length) throw new AppError('mfa/invalid_challenge');
        const method = await this.factors.verify(tx, tenantId, challenge.user_id, cmd.code, true);
        if (!method) throw new WrongCode();
        const [user] = await tx.query<SessionUser>(
          `WITH ${activityCtes('$1', { signIn: true })}
           SELECT id, tenant_id, email, email_verified, is_anonymous, role, created_at FROM users WHERE id = $1 AND tenant_id = $2`,
          [challenge.user_id, tenantId],
        );
        if (!user) throw new AppError('mfa/invalid_challenge');
        // the first factor's amr plus the second's; when both have the same value (an email code,
        // then a TOTP code: "otp" twice) "mfa" (RFC 8176) says there were two
        const amr = challenge.first_factor_amr.includes(method) ? [...new Set([...challenge.first_factor_amr, 'mfa'])] : [...challenge.first_factor_amr, method];
        await this.events.audit(tx, {
          tenantId,
          type: 'user.signed_in',
          actorType: 'user',
          actorId: user.id,
          targetType: 'user',
          targetId: user.id,
          metadata: { method: challenge.first_factor_amr.join('+'), mfa: method, aal: 'AAL2' },
        });
        const { sessionId: _s, ...response } = await this.sessions.start(tx, user, cmd.apiKey.tenant.userScopes, {
          amr,
          aal: 'AAL2',
          apiKeyId: cmd.apiKey.id,
        });
        return response;
      });
      await this.profiles.invalidate([challenge.user_id]); // last_sign_in_at
      await this.throttle.succeeded(realm, challenge.user_id, cmd.client.ip);
      // a passwordless sign-in that resumes an authorization request answers its oauth_params here
      return challenge.oauth_params ? { ...tokens, oauth_params: challenge.oauth_params } : tokens;
    } catch (e) {
      if (!(e instanceof WrongCode)) {
        // no code was judged (a duplicate of a request that used the challenge, a fault): its attempt goes
        await this.throttle.release(realm, challenge.user_id, cmd.client.ip);
        throw e;
      }
      await this.throttle.failed(realm, challenge.user_id, cmd.client.ip);
      // the first wrong code of a window from an address that never passed MFA for the user also
      // tells the user: their first factor is known to whoever this is
      const tell = !(await this.throttle.isKnownAddress(realm, challenge.user_id, cmd.client.ip)) && (await this.firstFailureInWindow(challenge.user_id));
      await this.db.tx(async (tx) => {
        await this.events.audit(tx, {
          tenantId,
          type: 'user.mfa_failed',
          actorType: 'user',
          actorId: challenge.user_id,
          targetType: 'user',
          targetId: challenge.user_id,
          severity: 'medium',
          metadata: { flow: 'login', attempt: claimed.attempts },
        });
        if (tell) await noticeMfaSignInFailed(tx, this.mail, { tenantId, userId: challenge.user_id }, challenge.first_factor_amr);
      }).catch(async (err: unknown) => {
        // not recorded: the window's notice is still to be sent
        if (tell) await this.redis.del(noticeMarker(challenge.user_id)).catch(() => undefined);
        throw err;
      });
      const dead = claimed.attempts >= MFA_CHALLENGE_MAX_ATTEMPTS;
      throw new AppError('mfa/invalid_code', dead ? 'Invalid code; the challenge has ended, sign in again' : 'Invalid code');
    }
  }

  /** True once per user and LOGIN_FAILURE_WINDOW_SECONDS (a Redis marker); false when Redis cannot tell. */
  private async firstFailureInWindow(userId: string): Promise<boolean> {
    const set = await this.redis.set(noticeMarker(userId), '1', 'EX', this.config.LOGIN_FAILURE_WINDOW_SECONDS, 'NX').catch(() => null);
    return set === 'OK';
  }
}
