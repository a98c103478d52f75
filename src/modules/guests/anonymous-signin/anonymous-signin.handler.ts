import { randomUUID } from 'crypto';
import { Inject } from '@nestjs/common';
import { CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import { APP_CONFIG, AppConfig } from '../../../config/config';
import { randomToken, sha256Hex } from '../../../shared/crypto/tokens';
import { Db } from '../../../shared/db/db.service';
import { AppError } from '../../../shared/errors/app-error';
import { CURRENT_MONTH_SQL } from '../../sessions/activity.sql';
import { SessionsService } from '../../sessions/sessions.service';
import { MAU_ALLOWANCE } from '../mau';
import { AnonymousSigninCommand } from './anonymous-signin.command';
import { AnonymousSigninResponse } from './anonymous-signin.request.dto';

/**
 * One statement: count the guest in the tenant's monthly active users (refused beyond the tier's
 * allowance), insert the user, its session and its refresh token. Then sign the access token.
 */
@CommandHandler(AnonymousSigninCommand)
export class AnonymousSigninHandler implements ICommandHandler<AnonymousSigninCommand, AnonymousSigninResponse> {
  constructor(
    private readonly db: Db,
    private readonly sessions: SessionsService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  async execute({ apiKey, publicMetadata }: AnonymousSigninCommand): Promise<AnonymousSigninResponse> {
    const t = apiKey.tenant;
    if (!t.anonymousSigninsEnabled) throw new AppError('anonymous/disabled');
    const userId = randomUUID();
    const sessionId = randomUUID();
    const refreshId = randomUUID();
    const secret = randomToken();
    // Db.ephemeral: no WAL-flush wait while the tenant's monthly counter row is locked
    const rows = await this.db.ephemeral.query<{ created_at: Date }>(
      `WITH m AS (
         INSERT INTO tenant_mau (tenant_id, month, active_users) VALUES ($1, ${CURRENT_MONTH_SQL}, 1)
         ON CONFLICT (tenant_id, month) DO UPDATE SET active_users = tenant_mau.active_users + 1
          WHERE $2::int IS NULL OR tenant_mau.active_users < $2::int
         RETURNING month
       ), u AS (
         INSERT INTO users (id, tenant_id, is_anonymous, role, public_metadata, created_by_api_key_id, mau_month)
         SELECT $3, $1, true, $4, $5, $6, month FROM m RETURNING id, created_at
       ), mu AS (
         INSERT INTO tenant_mau_users (tenant_id, month, user_id) SELECT $1, month, $3 FROM m
       ), s AS (
         INSERT INTO user_sessions (id, tenant_id, user_id, aal, amr, api_key_id)
         SELECT $7, $1, id, 'AAL1', '{anonymous}', $6 FROM u RETURNING id
       ), r AS (
         INSERT INTO refresh_tokens (id, session_id, tenant_id, user_id, secret_hash, expires_at)
         SELECT $8, s.id, $1, $3, $9, now() + make_interval(secs => $10) FROM s
       )
       SELECT created_at FROM u`,
      [
        apiKey.tenantId,
        MAU_ALLOWANCE[apiKey.tier],
        userId,
        t.defaultUserRole,
        JSON.stringify(publicMetadata),
        apiKey.id,
        sessionId,
        refreshId,
        sha256Hex(secret),
        this.config.REFRESH_TOKEN_TTL_SECONDS,
      ],
      'guest_create',
    );
    if (!rows.length) throw new AppError('anonymous/mau_exhausted');
    const createdAt = rows[0].created_at;
    const user = { id: userId, tenant_id: apiKey.tenantId, email: null, email_verified: false, is_anonymous: true, role: t.defaultUserRole, created_at: createdAt };
    const minted = await this.sessions.mint(user, t.userScopes, sessionId, ['anonymous'], 'AAL1');
    return {
      access_token: minted.access_token,
      refresh_token: `${refreshId}:${secret}`,
      expires_in: minted.expires_in,
      token_type: 'Bearer',
      user: { id: userId, is_anonymous: true, created_at: createdAt.toISOString() },
    };
  }
}
