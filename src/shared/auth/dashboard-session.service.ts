import { Inject, Injectable } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { APP_CONFIG, AppConfig } from '../../config/config';
import { Db, Queryable } from '../db/db.service';
import { randomToken, sha256Hex } from '../crypto/tokens';
import { DashboardPrincipal, Membership } from './auth-context';

export const DASHBOARD_COOKIE = 'authp_dashboard';

interface SessionRow {
  id: string;
  user_id: string;
  email: string;
  csrf_token: string;
  reauth_at: Date | null;
  last_seen_at: Date;
  memberships: Membership[];
}

/**
 * Server-side dashboard sessions: the cookie holds a random token, the database its SHA-256,
 * with an idle and an absolute timeout.
 */
@Injectable()
export class DashboardSessionService {
  constructor(
    private readonly db: Db,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  /** Creates a session in the caller's transaction; returns the cookie token and CSRF token. */
  async create(tx: Queryable, userId: string): Promise<{ token: string; csrfToken: string; sessionId: string }> {
    const token = randomToken();
    const csrfToken = randomToken();
    const [row] = await tx.query<{ id: string }>(
      `INSERT INTO dashboard_sessions (token_hash, user_id, csrf_token, absolute_expires_at)
       VALUES ($1, $2, $3, now() + make_interval(secs => $4)) RETURNING id`,
      [sha256Hex(token), userId, csrfToken, this.config.DASHBOARD_SESSION_ABSOLUTE_SECONDS],
    );
    return { token, csrfToken, sessionId: row.id };
  }

  /** The live session of a cookie token (idle and absolute timeouts applied), or undefined. */
  async find(token: string): Promise<DashboardPrincipal | undefined> {
    const rows = await this.db.query<SessionRow>(
      `SELECT s.id, s.user_id, u.email, s.csrf_token, COALESCE(s.reauth_at, s.created_at) AS reauth_at, s.last_seen_at,
              COALESCE((SELECT json_agg(json_build_object('tenant_id', t.id, 'tenant_slug', t.slug, 'role', m.role) ORDER BY t.slug)
                          FROM tenant_members m JOIN tenants t ON t.id = m.tenant_id WHERE m.user_id = s.user_id), '[]') AS memberships
         FROM dashboard_sessions s JOIN dashboard_users u ON u.id = s.user_id
        WHERE s.token_hash = $1 AND s.revoked_at IS NULL AND s.absolute_expires_at > now()
          AND s.last_seen_at > now() - make_interval(secs => $2)`,
      [sha256Hex(token), this.config.DASHBOARD_SESSION_IDLE_SECONDS],
      'dashboard_session_find',
    );
    const r = rows[0];
    if (!r) return undefined;
    // sliding idle timeout, written at most once a minute (or a quarter of a short idle timeout,
    // so activity always extends it)
    if (Date.now() - r.last_seen_at.getTime() > Math.min(60_000, (this.config.DASHBOARD_SESSION_IDLE_SECONDS * 1000) / 4)) {
      await this.db.query(`UPDATE dashboard_sessions SET last_seen_at = now() WHERE id = $1`, [r.id]);
    }
    return { userId: r.user_id, email: r.email, sessionId: r.id, csrfToken: r.csrf_token, reauthAt: r.reauth_at, memberships: r.memberships };
  }

  /** Ends a live session, in the caller's transaction; false when it had ended already (one winner). */
  async revoke(q: Queryable, sessionId: string): Promise<boolean> {
    return (await q.exec(`UPDATE dashboard_sessions SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL`, [sessionId])).rowCount > 0;
  }

  /** Marks a live session re-authenticated now, in the caller's transaction; undefined when it has ended. */
  async markReauthenticated(q: Queryable, sessionId: string): Promise<Date | undefined> {
    const [r] = await q.query<{ reauth_at: Date }>(`UPDATE dashboard_sessions SET reauth_at = now() WHERE id = $1 AND revoked_at IS NULL RETURNING reauth_at`, [sessionId]);
    return r?.reauth_at;
  }

  setCookie(reply: FastifyReply, token: string): void {
    reply.setCookie(DASHBOARD_COOKIE, token, {
      path: '/',
      httpOnly: true,
      sameSite: 'lax',
      secure: this.config.NODE_ENV !== 'development', // contract: Secure outside development
      maxAge: this.config.DASHBOARD_SESSION_ABSOLUTE_SECONDS,
    });
  }

  clearCookie(reply: FastifyReply): void {
    reply.clearCookie(DASHBOARD_COOKIE, { path: '/' });
  }
}
