import { randomUUID } from 'crypto';
import { Inject, Injectable } from '@nestjs/common';
import { APP_CONFIG, AppConfig } from '../../config/config';
import { TokenRevocationService } from '../../shared/auth/token-revocation.service';
import { Aal, JwtService } from '../../shared/crypto/jwt.service';
import { randomToken, safeEqual, sha256Hex } from '../../shared/crypto/tokens';
import { Batcher } from '../../shared/db/batcher';
import { Db, Queryable } from '../../shared/db/db.service';
import { EventsService } from '../../shared/events/events.service';
import { AppError, InvalidTokenError } from '../../shared/errors/app-error';
import { countRefreshReuse } from '../../shared/http/metrics';
import { activityCtes } from './activity.sql';

/** What a token response says about the user (contract "Tokens"). */
export interface TokenUser {
  id: string;
  email: string | null;
  email_verified: boolean;
  is_anonymous: boolean;
  created_at: string;
}

export interface TokenResponse {
  access_token: string;
  refresh_token: string;
  expires_in: number;
  token_type: 'Bearer';
  user: TokenUser;
}

/** The user row fields a token is minted from. */
export interface SessionUser {
  id: string;
  tenant_id: string;
  email: string | null;
  email_verified: boolean;
  is_anonymous: boolean;
  role: string;
  created_at: Date | string;
}

export interface SessionOptions {
  amr: string[];
  aal?: Aal;
  apiKeyId?: string | null;
  /** extra claims (mfa_enrollment_required, step_up_at, ...) */
  extraClaims?: Record<string, unknown>;
}

interface RefreshRow {
  id: string;
  secret_hash: string;
  session_id: string;
  rotated_at: Date | null;
  revoked_at: Date | null;
  expired: boolean;
  /** past SESSION_MAX_AGE_SECONDS since the user last signed in (never a guest) */
  session_too_old: boolean;
  session_revoked_at: Date | null;
  aal: Aal;
  amr: string[];
  /** the session's `auth_time` (NumericDate seconds) */
  auth_time: number;
  user_id: string;
  tenant_id: string;
  email: string | null;
  email_verified: boolean;
  is_anonymous: boolean;
  role: string;
  created_at: Date;
  user_scopes: string;
  creator_key_revoked: boolean;
  child_rotated: boolean;
  grace_ok: boolean;
  /** spec 2.8 `mfa_policy: required` and the user has no MFA: when the enrollment grace ends */
  mfa_enrollment_deadline: Date | null;
  /** that deadline has passed, by PostgreSQL's clock (the one the rotation itself went by) */
  enrollment_enforced: boolean;
}

/** A presented refresh token (id, tenant, SHA-256 of its secret) and the child to issue for it. */
interface Rotation {
  id: string;
  tenantId: string;
  presentedHash: string;
  newId: string;
  newHash: string;
}

/**
 * SQL: the session (alias `s`) of the user (alias `u`) is past SESSION_MAX_AGE_SECONDS (the
 * parameter `maxAge`, 0 = no limit) since the user last signed in. Guests are exempt (a guest
 * session is the account). Refresh, step-up and token exchange all refuse such a session, so no
 * path yields a fresh token for it.
 */
export const SESSION_TOO_OLD_SQL = (s: string, u: string, maxAge: string): string =>
  `(${maxAge}::int > 0 AND NOT ${u}.is_anonymous AND coalesce(${s}.authenticated_at, ${s}.created_at) <= now() - make_interval(secs => ${maxAge}::int))`;

/**
 * SQL: when the MFA enrollment grace of the user (alias `u`) ends under the tenant's (alias `t`)
 * `mfa_policy: required` (spec 2.8), NULL when no enrollment is owed (another policy, a guest, an
 * enabled factor). Refresh, step-up and token exchange issue nothing once it has passed, so a
 * session started before the deadline cannot outlive it, in the user's hands or an agent's.
 */
export const MFA_ENROLLMENT_DEADLINE_SQL = (t: string, u: string): string =>
  `CASE WHEN ${t}.mfa_policy <> 'required' OR ${u}.is_anonymous THEN NULL
        WHEN EXISTS (SELECT 1 FROM user_mfa_factors f WHERE f.user_id = ${u}.id AND f.enabled_at IS NOT NULL) THEN NULL
        ELSE greatest(coalesce(${t}.mfa_required_since, ${t}.created_at), ${u}.created_at, ${u}.claimed_at) + make_interval(secs => ${t}.mfa_grace_period_days * 86400)
   END`;

/**
 * A session's `auth_time` (NumericDate seconds) in SQL, for the `user_sessions` row aliased
 * `alias`: when the user last authenticated in it (a guest claim), else when it started.
 */
export const AUTH_TIME_SQL = (alias: string): string => `floor(extract(epoch FROM coalesce(${alias}.authenticated_at, ${alias}.created_at)))::float8`;

const REFRESH_SHAPE = /^([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}):([A-Za-z0-9_-]{43})$/;

/**
 * End-user sessions: a session row, refresh tokens `<id>:<secret>` (only the SHA-256 of the
 * secret stored) rotated on every use with reuse detection (RFC 9700 section 4.14), and RS256
 * access tokens carrying the contract's claims.
 */
@Injectable()
export class SessionsService {
  constructor(
    private readonly db: Db,
    private readonly jwt: JwtService,
    private readonly revocation: TokenRevocationService,
    private readonly events: EventsService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {
    this.rotator = new Batcher((items) => this.rotateMany(items), async (item) => (await this.rotateMany([item]))[0], { name: 'refresh_rotate', maxBatch: 64, maxInFlight: 2 });
  }

  private readonly rotator: Batcher<Rotation, (RefreshRow & { rotated_now: boolean }) | undefined>;

  /** SESSION_MAX_AGE_SECONDS, for SESSION_TOO_OLD_SQL's parameter (0 = no limit). */
  get maxAgeSeconds(): number {
    return this.config.SESSION_MAX_AGE_SECONDS;
  }

  /**
   * What a token-issuing path answers for a session SESSION_TOO_OLD_SQL found too old (refresh's
   * rule, shared by step-up): the session ends (listed with reason max_age) and the call is 401,
   * so the user signs in again.
   */
  async endTooOld(sessionId: string): Promise<never> {
    await this.endAudited(sessionId, 'max_age');
    throw new InvalidTokenError('invalid_token', 'The session has reached its maximum age; sign in again');
  }

  /**
   * Checks, before a step-up costs anything (a password check, a mail), that the session can still
   * get a token: live (else 401) and within SESSION_MAX_AGE_SECONDS (else endTooOld).
   */
  async assertCanStepUp(sessionId: string, userId: string, tenantId: string): Promise<void> {
    const [s] = await this.db.query<{ too_old: boolean }>(
      `SELECT ${SESSION_TOO_OLD_SQL('s', 'u', '$4')} AS too_old
         FROM user_sessions s JOIN users u ON u.id = s.user_id
        WHERE s.id = $1 AND s.user_id = $2 AND s.tenant_id = $3 AND s.revoked_at IS NULL`,
      [sessionId, userId, tenantId, this.config.SESSION_MAX_AGE_SECONDS],
      'session_step_up_check',
    );
    if (!s) throw new InvalidTokenError();
    if (s.too_old) await this.endTooOld(sessionId);
  }

  /** Starts a session in the caller's transaction and returns the token response. */
  async start(tx: Queryable, user: SessionUser, scope: string, opts: SessionOptions): Promise<TokenResponse & { sessionId: string }> {
    const sessionId = randomUUID();
    const refreshId = randomUUID();
    const secret = randomToken();
    const aal = opts.aal ?? 'AAL1';
    const [s] = await tx.query<{ auth_time: number }>(
      `WITH s AS (
         INSERT INTO user_sessions (id, tenant_id, user_id, aal, amr, api_key_id) VALUES ($1, $2, $3, $4, $5, $6) RETURNING id, created_at, authenticated_at
       ), r AS (
         INSERT INTO refresh_tokens (id, session_id, tenant_id, user_id, secret_hash, expires_at)
         SELECT $7, s.id, $2, $3, $8, now() + make_interval(secs => $9) FROM s
       )
       SELECT ${AUTH_TIME_SQL('s')} AS auth_time FROM s`,
      [sessionId, user.tenant_id, user.id, aal, opts.amr, opts.apiKeyId ?? null, refreshId, sha256Hex(secret), this.config.REFRESH_TOKEN_TTL_SECONDS],
      'session_start',
    );
    return { ...(await this.mint(user, scope, sessionId, opts.amr, aal, s.auth_time, opts.extraClaims)), refresh_token: `${refreshId}:${secret}`, sessionId };
  }

  /**
   * Locks a session row for the caller's transaction. Every writer that changes a session's refresh
   * chain takes this lock first (the claim here, refresh in its statement), so a refresh and a claim
   * of one session never interleave: whichever comes second waits, then sees what the first
   * committed (no second live chain, and no deadlock over the token and user rows).
   */
  async lockSession(tx: Queryable, sessionId: string): Promise<void> {
    const [s] = await tx.query<{ revoked_at: Date | null }>(`SELECT revoked_at FROM user_sessions WHERE id = $1 FOR UPDATE`, [sessionId], 'session_lock');
    // ended since the bearer check (a logout, a revocation that committed meanwhile): the token is dead
    if (!s || s.revoked_at) throw new InvalidTokenError();
  }

  /**
   * Continues an existing session with new credentials (a guest claimed by registering): the
   * session's outstanding refresh tokens are retired and a new pair is issued for the same sid.
   * The caller holds the session lock (`lockSession`) since the start of its transaction, so this
   * statement sees every refresh of the session that committed before, and none can follow.
   */
  async continueSession(tx: Queryable, user: SessionUser, scope: string, sessionId: string, opts: SessionOptions): Promise<TokenResponse> {
    const refreshId = randomUUID();
    const secret = randomToken();
    const aal = opts.aal ?? 'AAL1';
    // the claim is an authentication (the password just set): the session's auth_time is now
    const rows = await tx.query<{ id: string; auth_time: number }>(
      `WITH s AS (
         UPDATE user_sessions SET amr = $3, aal = $4, refreshed_at = now(), authenticated_at = now()
          WHERE id = $1 AND user_id = $2 AND revoked_at IS NULL RETURNING id, created_at, authenticated_at
       ), r AS (
         UPDATE refresh_tokens SET revoked_at = now() WHERE session_id IN (SELECT id FROM s) AND revoked_at IS NULL
       )
       INSERT INTO refresh_tokens (id, session_id, tenant_id, user_id, secret_hash, expires_at)
       SELECT $5, s.id, $6, $2, $7, now() + make_interval(secs => $8) FROM s RETURNING id, (SELECT ${AUTH_TIME_SQL('s')} FROM s) AS auth_time`,
      [sessionId, user.id, opts.amr, aal, refreshId, user.tenant_id, sha256Hex(secret), this.config.REFRESH_TOKEN_TTL_SECONDS],
    );
    // the session ended: its tokens are dead, and a claim never opens a new session in its place
    if (!rows.length) throw new InvalidTokenError();
    return { ...(await this.mint(user, scope, sessionId, opts.amr, aal, rows[0].auth_time, opts.extraClaims)), refresh_token: `${refreshId}:${secret}` };
  }

  /**
   * Signs an access token for a user in a session (also used by step-up and MFA). `authTime`: the
   * session's `auth_time` (NumericDate seconds, OIDC Core 2: when the user authenticated; kept
   * across refreshes; see AUTH_TIME_SQL).
   */
  async mint(
    user: SessionUser,
    scope: string,
    sessionId: string,
    amr: string[],
    aal: Aal,
    authTime: number,
    extra: Record<string, unknown> = {},
  ): Promise<Omit<TokenResponse, 'refresh_token'>> {
    const { token } = await this.jwt.sign({
      sub: user.id,
      tenant_id: user.tenant_id,
      sid: sessionId,
      scope,
      amr,
      aal,
      auth_time: authTime,
      role: user.role,
      is_anonymous: user.is_anonymous,
      email: user.email,
      email_verified: user.email_verified,
      ...extra,
    });
    return { access_token: token, expires_in: this.config.ACCESS_TOKEN_TTL_SECONDS, token_type: 'Bearer', user: toTokenUser(user) };
  }

  /**
   * Rotates a refresh token of the tenant. A token already rotated revokes the whole session
   * (reuse detection), except the immediate parent presented again within
   * REFRESH_REUSE_GRACE_SECONDS, which gets a fresh pair for the same session.
   */
  async refresh(tenantId: string, presented: string): Promise<TokenResponse> {
    return this.refreshOnce(tenantId, presented, false);
  }

  /** `again`: the token is read a second time, after a rotation of it that ran beside this one. */
  private async refreshOnce(tenantId: string, presented: string, again: boolean): Promise<TokenResponse> {
    const m = REFRESH_SHAPE.exec(presented);
    if (!m) throw new AppError('auth/invalid_refresh_token');
    const [, id, secret] = m;
    const newId = randomUUID();
    const newSecret = randomToken();
    // Common case in one statement, shared by concurrent refreshes (see rotateMany): look the token
    // up and, when it is live and not yet rotated, rotate it (conditional on rotated_at IS NULL: of
    // two parallel rotations one wins) and issue the child. Anything else (unknown, wrong secret,
    // reuse, the grace rule) is decided below.
    const row = await this.rotator.submit({ id, tenantId, presentedHash: sha256Hex(secret), newId, newHash: sha256Hex(newSecret) });
    if (row?.rotated_now) {
      return {
        ...(await this.mint({ ...row, id: row.user_id }, row.user_scopes, row.session_id, row.amr, row.aal, row.auth_time, enrollmentClaims(row))),
        refresh_token: `${newId}:${newSecret}`,
      };
    }
    // an unknown id or a wrong secret changes nothing (it may be a guess, not a stolen token)
    if (!row || !safeEqual(row.secret_hash, sha256Hex(secret))) throw new AppError('auth/invalid_refresh_token');
    // an expired token is refused whatever its history: the sweep forgets expired tokens a day
    // later, so reuse detection never depends on them
    if (row.session_revoked_at || row.expired) throw new AppError('auth/invalid_refresh_token');
    // A token rotated before and replayed outside the grace rule is reuse even when the guest's
    // creating API key has been revoked since: the session ends (the tokens issued in it since
    // would otherwise live on). Not for a token a claim retired without rotating it (see below).
    const graceful = this.config.REFRESH_REUSE_GRACE_SECONDS > 0 && row.grace_ok && !row.child_rotated;
    if (row.creator_key_revoked) {
      if (row.rotated_at && !graceful) return this.reuseDetected(row.session_id);
      throw new AppError('auth/invalid_refresh_token');
    }
    // the session's absolute lifetime: it ends (listed as such) and the user signs in again
    if (row.session_too_old) {
      await this.endAudited(row.session_id, 'max_age');
      throw new AppError('auth/invalid_refresh_token', 'The session has reached its maximum age; sign in again');
    }
    // retired while its session goes on: only a claim does that (continueSession). It was never
    // rotated, so presenting it is not reuse: a tab that held it, or a refresh that raced the claim
    // and got the token the claim then retired, is refused and the claimed session goes on. Ending
    // it would sign the user out right after signing up, and protect nothing: the token is dead
    if (row.revoked_at && !row.rotated_at) throw new AppError('auth/invalid_refresh_token');
    // the tenant requires MFA and this user's grace is over: no new tokens until they enroll (the
    // refresh token stays as it was, so nothing is lost; sign-in answers the same). Reuse
    // detection still comes first: a replayed token ends the session whatever the policy.
    // (by the statement's clock, which the rotation went by: this process's may differ)
    const enforced = row.enrollment_enforced;
    const refuseEnrollment = async () => (await this.enrollmentRefusal?.({ ...row, id: row.user_id })) ?? new AppError('mfa/enrollment_required');
    if (!row.rotated_at) {
      if (enforced) throw await refuseEnrollment();
      // lost a race with a parallel rotation of the same token: read it again, so the grace rule
      // decides as for a token presented just after the rotation (with the grace off, that is
      // reuse: the session ends whichever of the two arrived first, as in one rotate batch). Read
      // again, it is rotated; still not (nothing known does that): 503, never a loop
      if (again) throw new AppError('server/unavailable', 'The refresh token could not be rotated; send it again');
      return this.refreshOnce(tenantId, presented, true);
    }
    if (!graceful) return this.reuseDetected(row.session_id);
    if (enforced) throw await refuseEnrollment();
    // the grace case: the parent stays rotated and a sibling is issued for the same session
    const { rows } = await this.db.exec<{ ok: boolean }>(
      `WITH l AS (
         -- the session lock first, as every writer of a session's chain takes it (see lockSession)
         SELECT s.id FROM refresh_tokens r JOIN user_sessions s ON s.id = r.session_id WHERE r.id = $1 FOR UPDATE OF s
       ), rot AS (
         UPDATE refresh_tokens SET rotated_at = COALESCE(rotated_at, now())
          WHERE id = $1 AND session_id IN (SELECT id FROM l) AND revoked_at IS NULL AND (rotated_at IS NULL OR $5::boolean)
          RETURNING session_id, tenant_id, user_id
       ), ins AS (
         INSERT INTO refresh_tokens (id, session_id, tenant_id, user_id, secret_hash, parent_id, expires_at)
         SELECT $2, session_id, tenant_id, user_id, $3, $1, now() + make_interval(secs => $4) FROM rot RETURNING user_id
       ), ses AS (
         UPDATE user_sessions SET refreshed_at = now() WHERE id = (SELECT session_id FROM rot) AND revoked_at IS NULL RETURNING id
       ), ${activityCtes('(SELECT user_id FROM ins)')}
       SELECT EXISTS (SELECT 1 FROM ins) AND EXISTS (SELECT 1 FROM ses) AS ok`,
      [id, newId, sha256Hex(newSecret), this.config.REFRESH_TOKEN_TTL_SECONDS, true],
      'refresh_rotate',
    );
    if (!rows[0]?.ok) throw new AppError('auth/invalid_refresh_token');
    const user: SessionUser = row;
    return {
      ...(await this.mint({ ...user, id: row.user_id }, row.user_scopes, row.session_id, row.amr, row.aal, row.auth_time, enrollmentClaims(row))),
      refresh_token: `${newId}:${newSecret}`,
    };
  }

  /** Reuse detection (RFC 9700 section 4.14): the session ends and the presenter gets a 401. */
  private async reuseDetected(sessionId: string): Promise<never> {
    await this.endAudited(sessionId, 'refresh_token_reuse');
    throw new AppError('auth/invalid_refresh_token', 'Refresh token reuse detected; the session has ended');
  }

  /**
   * The fast path of refresh for several presented tokens in one statement: each token's row (and
   * its session, user, tenant) with `rotated_now` when this statement rotated it and issued its
   * child. A token presented twice in one batch goes again in a batch of its own after this one,
   * so it meets the outcome of the first (rotated: the grace rule decides), never a second child.
   */
  private async rotateMany(items: Rotation[]): Promise<((RefreshRow & { rotated_now: boolean }) | undefined)[]> {
    const seen = new Set<string>();
    const first: Rotation[] = [];
    const again: number[] = [];
    items.forEach((it, k) => {
      if (seen.has(it.id)) again.push(k);
      else {
        seen.add(it.id);
        first.push(it);
      }
    });
    const rows = await this.db.query<RefreshRow & { rotated_now: boolean }>(
      `WITH i AS (
         SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::uuid[], $5::text[]) AS i(id, tenant_id, presented_hash, new_id, new_hash)
       ), cur AS (
         SELECT i.presented_hash, i.new_id, i.new_hash,
                rt.id, rt.secret_hash, rt.session_id, rt.rotated_at, rt.revoked_at, rt.expires_at < now() AS expired,
                ${SESSION_TOO_OLD_SQL('s', 'u', '$8')} AS session_too_old,
                s.revoked_at AS session_revoked_at, s.aal, s.amr, ${AUTH_TIME_SQL('s')} AS auth_time,
                u.id AS user_id, u.tenant_id, u.email, u.email_verified, u.is_anonymous, u.created_at,
                -- a guest's tokens carry the tenant's default role of the day, until registration (spec 5 rule 5)
                CASE WHEN u.is_anonymous THEN t.default_user_role ELSE u.role END AS role,
                t.user_scopes,
                (u.is_anonymous AND ck.revoked_at IS NOT NULL) AS creator_key_revoked,
                (rt.rotated_at IS NOT NULL AND EXISTS (
                   SELECT 1 FROM refresh_tokens c WHERE c.parent_id = rt.id AND c.rotated_at IS NOT NULL)) AS child_rotated,
                (rt.rotated_at IS NOT NULL AND rt.rotated_at > now() - make_interval(secs => $6)) AS grace_ok,
                ${MFA_ENROLLMENT_DEADLINE_SQL('t', 'u')} AS mfa_enrollment_deadline
           FROM i
           JOIN refresh_tokens rt ON rt.id = i.id AND rt.tenant_id = i.tenant_id
           JOIN user_sessions s ON s.id = rt.session_id
           JOIN users u ON u.id = rt.user_id
           JOIN tenants t ON t.id = rt.tenant_id
           LEFT JOIN api_keys ck ON ck.id = u.created_by_api_key_id
          -- the session locks first, in one order (see lockSession): a claim of the session waits
          -- for this rotation to commit, or this rotation for the claim (then finds its token revoked)
          ORDER BY s.id
          FOR UPDATE OF s
       ), rot AS (
         UPDATE refresh_tokens r SET rotated_at = now()
           FROM cur
          WHERE r.id = cur.id AND r.rotated_at IS NULL AND r.revoked_at IS NULL AND cur.secret_hash = cur.presented_hash
            AND cur.session_revoked_at IS NULL AND NOT cur.expired AND NOT cur.session_too_old AND NOT cur.creator_key_revoked
            AND (cur.mfa_enrollment_deadline IS NULL OR cur.mfa_enrollment_deadline > now())
          RETURNING r.id, r.session_id, r.tenant_id, r.user_id
       ), ins AS (
         INSERT INTO refresh_tokens (id, session_id, tenant_id, user_id, secret_hash, parent_id, expires_at)
         SELECT cur.new_id, rot.session_id, rot.tenant_id, rot.user_id, cur.new_hash, rot.id, now() + make_interval(secs => $7)
           FROM rot JOIN cur ON cur.id = rot.id
         RETURNING parent_id, user_id
       ), ses AS (
         UPDATE user_sessions SET refreshed_at = now() WHERE id IN (SELECT session_id FROM rot) AND revoked_at IS NULL RETURNING id
       ), ${activityCtes('ANY(ARRAY(SELECT user_id FROM ins))')}
       SELECT cur.*, (ins.parent_id IS NOT NULL AND ses.id IS NOT NULL) AS rotated_now,
              coalesce(cur.mfa_enrollment_deadline <= now(), false) AS enrollment_enforced
         FROM cur LEFT JOIN ins ON ins.parent_id = cur.id LEFT JOIN ses ON ses.id = cur.session_id`,
      [
        first.map((r) => r.id),
        first.map((r) => r.tenantId),
        first.map((r) => r.presentedHash),
        first.map((r) => r.newId),
        first.map((r) => r.newHash),
        this.config.REFRESH_REUSE_GRACE_SECONDS,
        this.config.REFRESH_TOKEN_TTL_SECONDS,
        this.config.SESSION_MAX_AGE_SECONDS,
      ],
      'refresh_rotate_batch',
    );
    const byId = new Map(rows.map((r) => [r.id, r]));
    const out = items.map((it) => byId.get(it.id));
    for (const k of again) out[k] = (await this.rotateMany([items[k]]))[0];
    return out;
  }

  private enrollmentRefusal?: (user: SessionUser & { auth_time: number; session_id: string }) => Promise<Error>;

  /**
   * What a refresh answers once the user's MFA enrollment grace is over (spec 2.8): the MFA
   * module registers the same 403 `mfa/enrollment_required` with an enrollment-only token that
   * sign-in answers, so a session started before the deadline cannot outlive the policy. The user
   * comes with the session's `auth_time` (its sign-in, which the token records) and id.
   */
  onEnrollmentEnforced(refusal: (user: SessionUser & { auth_time: number; session_id: string }) => Promise<Error>): void {
    this.enrollmentRefusal = refusal;
  }

  /**
   * Ends a session the service itself found stolen or too old, audited in the same transaction as
   * `user.session_ended` with the reason (a refresh token's reuse: severity high, someone else may
   * hold the session; the maximum age: info), as every other way a session ends is audited.
   */
  private async endAudited(sessionId: string, reason: 'refresh_token_reuse' | 'max_age'): Promise<void> {
    const ended = await this.db.tx(async (tx) => {
      if (!(await this.revokeSession(sessionId, reason, tx))) return false;
      const [s] = await tx.query<{ tenant_id: string; user_id: string }>(`SELECT tenant_id, user_id FROM user_sessions WHERE id = $1`, [sessionId]);
      await this.events.audit(tx, {
        tenantId: s.tenant_id,
        type: 'user.session_ended',
        severity: reason === 'refresh_token_reuse' ? 'high' : 'info',
        actorType: 'system',
        targetType: 'session',
        targetId: sessionId,
        metadata: { user_id: s.user_id, reason },
      });
      return true;
    });
    // a reuse that ended the session (once: a session another request ended already is not counted again)
    if (ended && reason === 'refresh_token_reuse') countRefreshReuse();
    await this.revocation.markSessionsRevoked([sessionId]);
  }

  /**
   * Ends one session: its refresh tokens stop working and its access tokens are refused. In a
   * caller's transaction (`tx`) the caller calls `markSessionsRevoked` after its commit (see
   * TokenRevocationService for why the order matters); alone it does both.
   */
  async revokeSession(sessionId: string, reason: string, tx?: Queryable): Promise<boolean> {
    const which = { sessionId };
    const ended = await (tx ? this.endSessions(tx, which, reason) : this.db.tx((t) => this.endSessions(t, which, reason)));
    if (!tx) await this.revocation.markSessionsRevoked([sessionId]);
    return ended.length > 0;
  }

  /**
   * Locks the user's live sessions, first thing in a transaction that changes the user's row and
   * then ends its sessions (password reset or change, a first passwordless sign-in clearing unproven
   * credentials): refresh locks a session and then the user's row, so taking the user's row first
   * and the sessions after could deadlock with it (one of the two then fails).
   */
  async lockUserSessions(tx: Queryable, userId: string): Promise<string[]> {
    const rows = await tx.query<{ id: string }>(`SELECT id FROM user_sessions WHERE user_id = $1 AND revoked_at IS NULL ORDER BY id FOR UPDATE`, [userId], 'user_sessions_lock');
    return rows.map((r) => r.id);
  }

  /**
   * Ends every session of a user except `keep` (password reset and change, sign-out everywhere);
   * as revokeSession. The user's pending MFA challenges go too: each was granted on a first factor
   * (a password) that this very change stops trusting, and would otherwise still open a session.
   * The sessions are locked first (a no-op for a caller that locked them already), then the
   * challenges: the order of every writer of both (an MFA enrollment spends the user's enrollment
   * grants with the sessions locked; the other order deadlocked with it).
   */
  async revokeUserSessions(tx: Queryable, userId: string, reason: string, keep?: string): Promise<string[]> {
    await this.lockUserSessions(tx, userId);
    await tx.query(`DELETE FROM mfa_challenges WHERE user_id = $1 AND used_at IS NULL`, [userId]);
    return this.endSessions(tx, { userId, keep }, reason);
  }

  /**
   * revokeUserSessions for a change that cannot be sent again once committed (a single-use reset
   * link or email code, a password change: the retry's current password is gone): the ended
   * sessions are also marked in Redis before the caller's commit, so a Redis that takes no write
   * rolls the change back (503, and the retry finds everything as it was) instead of committing
   * it with the sessions' access tokens still accepted where they were cached as live. The caller
   * marks them again after its commit (TokenRevocationService: a Redis that only took the
   * deletes leaves a slot a reader may fill as live until the commit).
   */
  async revokeUserSessionsMarked(tx: Queryable, userId: string, reason: string, keep?: string): Promise<string[]> {
    const ended = await this.revokeUserSessions(tx, userId, reason, keep);
    try {
      await this.revocation.markSessionsRevoked(ended);
    } catch (e) {
      // the change rolls back, so marks Redis did take (too few replicas acknowledged them) would
      // refuse sessions that stay live: taken away again (a reader then asks PostgreSQL, which
      // says live), best effort
      await this.revocation.forgetSessionMarks(ended).catch(() => undefined);
      throw e;
    }
    return ended;
  }

  /**
   * Ends the user's sessions below AAL2 but `keep` (the caller's own): a second factor was just
   * enabled, so a password-only session opened before it (perhaps a stolen one) must not go on
   * refreshing at AAL1. Only the sessions `locked` (lockUserSessions, first in the transaction):
   * one opened since, whose lock another transaction may hold while it waits for ours (a sign-out
   * everywhere or an erasure from that new session), would be taken out of order, a deadlock.
   */
  async revokeSessionsBelowAal2(tx: Queryable, userId: string, reason: string, locked: string[], keep?: string): Promise<string[]> {
    return this.endSessions(tx, { userId, keep, belowAal2: true, only: locked }, reason);
  }

  /**
   * Ends sessions and retires their refresh tokens. Two statements, the session first: its row lock
   * waits for a refresh of the session in flight (refresh takes it first too), and the token
   * update, a statement of its own, then sees the token that refresh issued. In one statement the
   * token update would read the snapshot taken before the wait and leave that token unrevoked.
   */
  private async endSessions(tx: Queryable, which: { sessionId: string } | { userId: string; keep?: string; belowAal2?: boolean; only?: string[] }, reason: string): Promise<string[]> {
    const ended =
      'sessionId' in which
        ? await tx.query<{ id: string }>(
            `UPDATE user_sessions SET revoked_at = now(), revoked_reason = $2 WHERE id = $1 AND revoked_at IS NULL RETURNING id`,
            [which.sessionId, reason],
          )
        : await tx.query<{ id: string }>(
            `UPDATE user_sessions SET revoked_at = now(), revoked_reason = $2
              WHERE user_id = $1 AND revoked_at IS NULL AND ($3::uuid IS NULL OR id <> $3) AND (NOT $4::boolean OR aal <> 'AAL2')
                AND ($5::uuid[] IS NULL OR id = ANY($5::uuid[])) RETURNING id`,
            [which.userId, reason, which.keep ?? null, which.belowAal2 ?? false, which.only ?? null],
          );
    const ids = ended.map((r) => r.id);
    if (ids.length) await tx.query(`UPDATE refresh_tokens SET revoked_at = now() WHERE session_id = ANY($1::uuid[]) AND revoked_at IS NULL`, [ids]);
    return ids;
  }
}

/** Within the MFA enrollment grace, refreshed tokens say so as sign-in's do. */
function enrollmentClaims(row: Pick<RefreshRow, 'mfa_enrollment_deadline'>): Record<string, unknown> {
  if (!row.mfa_enrollment_deadline) return {};
  return { mfa_enrollment_required: true, mfa_enrollment_deadline: Math.floor(new Date(row.mfa_enrollment_deadline).getTime() / 1000) };
}

export function toTokenUser(u: SessionUser): TokenUser {
  return {
    id: u.id,
    email: u.email,
    email_verified: u.email_verified,
    is_anonymous: u.is_anonymous,
    created_at: new Date(u.created_at).toISOString(),
  };
}
