import { randomUUID } from 'crypto';
import { Inject } from '@nestjs/common';
import { CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import { APP_CONFIG, AppConfig } from '../../../config/config';
import { randomToken, sha256Hex } from '../../../shared/crypto/tokens';
import { Db } from '../../../shared/db/db.service';
import { Batcher } from '../../../shared/db/batcher';
import { AppError } from '../../../shared/errors/app-error';
import { CURRENT_MONTH_SQL } from '../../sessions/activity.sql';
import { SessionsService } from '../../sessions/sessions.service';
import { MAU_ALLOWANCE } from '../mau';
import { AnonymousSigninCommand } from './anonymous-signin.command';
import { AnonymousSigninResponse } from './anonymous-signin.request.dto';

/** One guest to create: what the statement inserts. */
interface NewGuest {
  tenantId: string;
  /** the tier's monthly active user allowance (null: none) */
  cap: number | null;
  userId: string;
  role: string;
  publicMetadata: string;
  apiKeyId: string;
  sessionId: string;
  refreshId: string;
  secretHash: string;
}

/**
 * One statement: count the guest in the tenant's monthly active users (refused beyond the tier's
 * allowance), insert the user, its session and its refresh token. Then sign the access token.
 * The new user row carries the month it was counted in (`mau_month`), so its later activity this
 * month never counts it again; no `tenant_mau_users` row is needed for that (that table guards
 * two concurrent first activities of an existing user in a new month, see activity.sql.ts).
 * Concurrent sign-ins of a process share one statement (Batcher): the tenant's counter row is
 * locked once per batch instead of once per guest.
 */
@CommandHandler(AnonymousSigninCommand)
export class AnonymousSigninHandler implements ICommandHandler<AnonymousSigninCommand, AnonymousSigninResponse> {
  private readonly creator: Batcher<NewGuest, Date | null>;

  constructor(
    private readonly db: Db,
    private readonly sessions: SessionsService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {
    this.creator = new Batcher((guests) => this.create(guests), async (guest) => (await this.create([guest]))[0], { name: 'guest_create', maxBatch: 64, maxInFlight: 2 });
  }

  async execute({ apiKey, publicMetadata }: AnonymousSigninCommand): Promise<AnonymousSigninResponse> {
    const t = apiKey.tenant;
    if (!t.anonymousSigninsEnabled) throw new AppError('anonymous/disabled');
    const userId = randomUUID();
    const sessionId = randomUUID();
    const refreshId = randomUUID();
    const secret = randomToken();
    const createdAt = await this.creator.submit({
      tenantId: apiKey.tenantId,
      cap: MAU_ALLOWANCE[apiKey.tier],
      userId,
      role: t.defaultUserRole,
      publicMetadata: JSON.stringify(publicMetadata),
      apiKeyId: apiKey.id,
      sessionId,
      refreshId,
      secretHash: sha256Hex(secret),
    });
    if (!createdAt) throw new AppError('anonymous/mau_exhausted');
    const user = { id: userId, tenant_id: apiKey.tenantId, email: null, email_verified: false, is_anonymous: true, role: t.defaultUserRole, created_at: createdAt };
    // the session starts in the statement that created the guest (the same now()): its auth_time
    const minted = await this.sessions.mint(user, t.userScopes, sessionId, ['anonymous'], 'AAL1', Math.floor(createdAt.getTime() / 1000));
    return {
      access_token: minted.access_token,
      refresh_token: `${refreshId}:${secret}`,
      expires_in: minted.expires_in,
      token_type: 'Bearer',
      user: { id: userId, is_anonymous: true, created_at: createdAt.toISOString() },
    };
  }

  /**
   * One or many guests in one statement; null for a guest refused by its tenant's allowance. Each
   * tenant's counter moves once, by its number of guests in the statement, and only if all of them
   * fit (counter rows locked in tenant order, so two batches never deadlock; Db.ephemeral: no
   * WAL-flush wait while they are locked). The guests of a tenant that did not fit go again one
   * by one, so exactly as many are admitted as the allowance still has room for.
   */
  private async create(guests: NewGuest[]): Promise<(Date | null)[]> {
    const col = <K extends keyof NewGuest>(k: K) => guests.map((g) => g[k]);
    const rows = await this.db.ephemeral.query<{ id: string; created_at: Date }>(
      `WITH i AS (
         SELECT * FROM unnest($1::uuid[], $2::int[], $3::uuid[], $4::text[], $5::jsonb[], $6::uuid[], $7::uuid[], $8::uuid[], $9::text[])
           AS i(tenant_id, cap, user_id, role, public_metadata, api_key_id, session_id, refresh_id, secret_hash)
       ), g AS (
         SELECT tenant_id, count(*)::int AS n, max(cap) AS cap FROM i GROUP BY tenant_id
       ), m AS (
         INSERT INTO tenant_mau AS tm (tenant_id, month, active_users)
         SELECT tenant_id, ${CURRENT_MONTH_SQL}, n FROM g WHERE cap IS NULL OR n <= cap ORDER BY tenant_id
         ON CONFLICT (tenant_id, month) DO UPDATE SET active_users = tm.active_users + EXCLUDED.active_users
          WHERE tm.active_users + EXCLUDED.active_users <= coalesce((SELECT g.cap FROM g WHERE g.tenant_id = tm.tenant_id), 2147483647)
         RETURNING tenant_id, month
       ), u AS (
         INSERT INTO users (id, tenant_id, is_anonymous, role, public_metadata, created_by_api_key_id, mau_month, last_sign_in_at)
         SELECT i.user_id, i.tenant_id, true, i.role, i.public_metadata, i.api_key_id, m.month, now() FROM i JOIN m USING (tenant_id)
         RETURNING id, created_at
       ), s AS (
         INSERT INTO user_sessions (id, tenant_id, user_id, aal, amr, api_key_id)
         SELECT i.session_id, i.tenant_id, u.id, 'AAL1', '{anonymous}', i.api_key_id FROM i JOIN u ON u.id = i.user_id RETURNING id
       ), r AS (
         INSERT INTO refresh_tokens (id, session_id, tenant_id, user_id, secret_hash, expires_at)
         SELECT i.refresh_id, s.id, i.tenant_id, i.user_id, i.secret_hash, now() + make_interval(secs => $10) FROM i JOIN s ON s.id = i.session_id
       )
       SELECT id, created_at FROM u`,
      [
        col('tenantId'),
        col('cap'),
        col('userId'),
        col('role'),
        col('publicMetadata'),
        col('apiKeyId'),
        col('sessionId'),
        col('refreshId'),
        col('secretHash'),
        this.config.REFRESH_TOKEN_TTL_SECONDS,
      ],
      'guest_create',
    );
    const created = new Map(rows.map((r) => [r.id, r.created_at]));
    if (guests.length === 1) return [created.get(guests[0].userId) ?? null];
    return Promise.all(guests.map(async (g) => created.get(g.userId) ?? (await this.create([g]))[0]));
  }
}
