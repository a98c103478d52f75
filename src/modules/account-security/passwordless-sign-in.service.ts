import { Injectable } from '@nestjs/common';
import { ApiKeyPrincipal } from '../../shared/auth/auth-context';
import { TokenRevocationService } from '../../shared/auth/token-revocation.service';
import { UserProfileCache } from '../../shared/cache/user-profile.cache';
import { Db, Queryable } from '../../shared/db/db.service';
import { AppError } from '../../shared/errors/app-error';
import { ErrorCode } from '../../shared/errors/error-codes';
import { EventsService } from '../../shared/events/events.service';
import { activityCtes } from '../sessions/activity.sql';
import { SessionsService, SessionUser, TokenResponse } from '../sessions/sessions.service';
import { MfaRequiredResponse } from '../users/login/login-user.command';
import { LoginPolicy, NO_PASSWORD, passwordUnchanged } from '../users/login-policy.service';

/** How a passwordless sign-in ends: its method, and the refusal of a spent link or code (`deadProof`). */
interface Finish {
  key: ApiKeyPrincipal;
  method: string;
  amr: string[];
  oauthParams?: Record<string, string> | null;
  deadProof: ErrorCode;
}

/** A passwordless sign-in answers a token response (with the resumed oauth_params, if any) or an MFA challenge. */
export type PasswordlessResponse = (TokenResponse & { oauth_params?: Record<string, string> }) | MfaRequiredResponse;

/**
 * A user who proved the first factor: the sessions proveEmail ended (refused at once once its
 * transaction committed), and the password hash stored then (null: none), which must still be
 * stored when the session starts (a reset or change committed in between ends what existed).
 */
export type ProvenUser = SessionUser & { endedSessions?: string[]; passwordHash: string | null };

interface UserRow {
  id: string;
  tenant_id: string;
  email: string;
  role: string;
  created_at: Date;
  password_hash: string | null;
}

/**
 * The end of a magic-link or email-code sign-in: the user proved control of the mailbox, so the
 * address becomes verified; then the same policy as after a correct password (MFA challenge,
 * MFA enrollment) and a new session.
 */
@Injectable()
export class PasswordlessSignIn {
  constructor(
    private readonly db: Db,
    private readonly sessions: SessionsService,
    private readonly events: EventsService,
    private readonly loginPolicy: LoginPolicy,
    private readonly profiles: UserProfileCache,
    private readonly revocation: TokenRevocationService,
  ) {}

  /**
   * Marks the address verified for a user that still has it (a token or code for an address the
   * user no longer has proves nothing: undefined).
   *
   * The first proof of mailbox control for an account nobody had verified also clears what was
   * set on it without that proof (pre-account-takeover defence): the password and every session,
   * unless the mailbox owner set the password by reset (`password_proven`; that reset already
   * ended the earlier sessions). Whoever registered the address before its owner keeps no way
   * in; the owner signs in by this link or code and sets a password by reset. MFA factors stay: a second factor enrolled before
   * verification is still asked for (an attacker's factor locks the owner out, which support
   * can undo, rather than letting a mailbox alone skip a real owner's factor). The ended
   * sessions are marked in Redis before this transaction commits (a Redis that takes no write
   * rolls it back, the single-use link or code unspent) and again by `finish` after it.
   */
  async proveEmail(tx: Queryable, tenantId: string, userId: string, emailNormalized: string, method: string): Promise<ProvenUser | undefined> {
    await this.sessions.lockUserSessions(tx, userId);
    const [u] = await tx.query<UserRow & { was_verified: boolean; had_password: boolean; password_proven: boolean }>(
      `WITH o AS (SELECT id, email_verified, password_proven, password_hash IS NOT NULL AND NOT password_proven AS had_password FROM users
                   WHERE id = $1 AND tenant_id = $2 AND email_normalized = $3 AND NOT is_anonymous FOR UPDATE)
       UPDATE users u SET email_verified = true, updated_at = now(),
              password_hash = CASE WHEN o.email_verified OR o.password_proven THEN u.password_hash END
         FROM o WHERE u.id = o.id
       RETURNING u.id, u.tenant_id, u.email, u.role, u.created_at, u.password_hash, o.email_verified AS was_verified, o.had_password, o.password_proven`,
      [userId, tenantId, emailNormalized],
      'passwordless_prove_email',
    );
    if (!u) return undefined;
    if (u.was_verified) return toSessionUser(u);
    // a password the mailbox owner set by reset: that reset already ended every earlier session
    const ended = u.password_proven ? [] : await this.sessions.revokeUserSessionsMarked(tx, u.id, 'unverified_credentials_cleared');
    const cleared = { password: u.had_password, sessions: ended.length };
    await this.events.audit(tx, { tenantId, type: 'user.email_verified', actorType: 'user', actorId: u.id, targetType: 'user', targetId: u.id, metadata: { method, cleared_unverified: cleared } });
    return { ...toSessionUser(u), endedSessions: ended };
  }

  /**
   * Email code with `mode: login_or_create` for an address without an account: a new user whose
   * address is verified (the code proved it). An account created for the address meanwhile is
   * signed in instead.
   */
  async createOrProve(tx: Queryable, key: ApiKeyPrincipal, email: string, emailNormalized: string, method: string): Promise<ProvenUser | undefined> {
    if (key.tenant.minorProtectionEnabled) {
      // under minor protection an account needs a date of birth (spec 2.2), which a code cannot
      // carry: only an existing account signs in this way (the code stays unused)
      const [existing] = await tx.query<{ id: string }>(`SELECT id FROM users WHERE tenant_id = $1 AND email_normalized = $2`, [key.tenantId, emailNormalized]);
      if (existing) return this.proveEmail(tx, key.tenantId, existing.id, emailNormalized, method);
      throw new AppError('user/date_of_birth_required', 'This tenant needs a date of birth for a new account: register with POST /v1/auth/register');
    }
    const [created] = await tx.query<UserRow>(
      `INSERT INTO users (tenant_id, email, email_normalized, email_verified, role, created_by_api_key_id)
       VALUES ($1, $2, $3, true, $4, $5)
       ON CONFLICT (tenant_id, email_normalized) WHERE email_normalized IS NOT NULL DO NOTHING
       RETURNING id, tenant_id, email, role, created_at, password_hash`,
      [key.tenantId, email, emailNormalized, key.tenant.defaultUserRole, key.id],
    );
    if (!created) {
      const [existing] = await tx.query<{ id: string }>(`SELECT id FROM users WHERE tenant_id = $1 AND email_normalized = $2`, [key.tenantId, emailNormalized]);
      return existing ? this.proveEmail(tx, key.tenantId, existing.id, emailNormalized, method) : undefined;
    }
    await this.events.audit(tx, {
      tenantId: key.tenantId,
      type: 'user.registered',
      actorType: 'user',
      actorId: created.id,
      targetType: 'user',
      targetId: created.id,
      metadata: { method },
    });
    return toSessionUser(created);
  }

  /** Applies the login policy (MFA) and starts the session: amr names the method (RFC 8176 where it has a value). */
  async finish(user: ProvenUser, o: Finish): Promise<PasswordlessResponse> {
    // the caller's transaction (proveEmail) has committed: email_verified; then last_sign_in_at
    if (user.endedSessions?.length) await this.revocation.markSessionsRevoked(user.endedSessions);
    try {
      return await this.signIn(user, o);
    } finally {
      await this.profiles.invalidate([user.id]);
    }
  }

  private async signIn(user: ProvenUser, o: Finish): Promise<PasswordlessResponse> {
    // the link or code was consumed in a transaction of its own: a password reset or change that
    // committed since ended the sessions and challenges of the moment, and this sign-in must not
    // start one past it (as a password sign-in's recheck; the link is spent either way)
    const passwordHashes = [user.passwordHash ?? NO_PASSWORD];
    const decision = await this.loginPolicy.afterPassword(user, { amr: o.amr, oauthParams: o.oauthParams, passwordHashes }).catch((e: unknown) => {
      throw e instanceof AppError && e.code === 'auth/invalid_credentials' ? new AppError(o.deadProof) : e;
    });
    if (decision.challenge) return decision.challenge;
    return this.db.tx(async (tx) => {
      if (!(await passwordUnchanged(tx, user.id, passwordHashes))) throw new AppError(o.deadProof);
      await tx.query(`WITH ${activityCtes('$1', { signIn: true })} SELECT 1`, [user.id], 'passwordless_login_touch');
      await this.events.audit(tx, {
        tenantId: user.tenant_id,
        type: 'user.signed_in',
        actorType: 'user',
        actorId: user.id,
        targetType: 'user',
        targetId: user.id,
        metadata: { method: o.method },
      });
      const { sessionId: _s, ...tokens } = await this.sessions.start(tx, user, o.key.tenant.userScopes, {
        amr: o.amr,
        apiKeyId: o.key.id,
        extraClaims: decision.extraClaims,
      });
      return o.oauthParams ? { ...tokens, oauth_params: o.oauthParams } : tokens;
    });
  }
}

function toSessionUser(u: UserRow): ProvenUser {
  return { id: u.id, tenant_id: u.tenant_id, email: u.email, email_verified: true, is_anonymous: false, role: u.role, created_at: u.created_at, passwordHash: u.password_hash };
}
