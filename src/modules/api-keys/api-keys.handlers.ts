import { requireInvalidated } from '../../shared/cache/read-through.cache';
import { Command, CommandHandler, ICommandHandler, IQueryHandler, Query, QueryHandler } from '@nestjs/cqrs';
import { DashboardPrincipal } from '../../shared/auth/auth-context';
import { ApiKeyCache } from '../../shared/cache/api-key.cache';
import { randomToken, sha256Hex } from '../../shared/crypto/tokens';
import { Db } from '../../shared/db/db.service';
import { keysetPosition, Page, toPage } from '../../shared/db/pagination';
import { assertTenantCap } from '../../shared/db/tenant-cap';
import { AppError } from '../../shared/errors/app-error';
import { EventsService } from '../../shared/events/events.service';
import { ApiKeyResponse } from './api-keys.dto';

/** Keys look like `authp_<43 base64url chars>` (256 bits); `prefix` identifies one in lists. */
export const API_KEY_PREFIX = 'authp_';
/**
 * Live (not revoked) API keys a tenant may hold: far more than backends and environments need, few
 * enough that the per-tenant cache invalidation (every key) stays cheap and a stolen session
 * cannot mint keys without end.
 */
export const MAX_ACTIVE_API_KEYS_PER_TENANT = 50;

interface KeyRow {
  id: string;
  name: string;
  prefix: string;
  created_at: Date;
  revoked_at: Date | null;
}

const toResponse = (r: KeyRow): ApiKeyResponse => ({
  id: r.id,
  name: r.name,
  prefix: r.prefix,
  created_at: r.created_at.toISOString(),
  revoked_at: r.revoked_at ? r.revoked_at.toISOString() : null,
});

/** contract: 201 {id, name, key, prefix, created_at} (a new key is never revoked) */
export type CreatedApiKey = Omit<ApiKeyResponse, 'revoked_at'> & { key: string };

export class CreateApiKeyCommand extends Command<CreatedApiKey> {
  constructor(readonly actor: DashboardPrincipal, readonly name: string) {
    super();
  }
}

@CommandHandler(CreateApiKeyCommand)
export class CreateApiKeyHandler implements ICommandHandler<CreateApiKeyCommand> {
  constructor(private readonly db: Db, private readonly events: EventsService) {}

  async execute(cmd: CreateApiKeyCommand): Promise<CreatedApiKey> {
    const tenantId = cmd.actor.tenant!.id;
    const key = `${API_KEY_PREFIX}${randomToken()}`;
    const prefix = key.slice(0, API_KEY_PREFIX.length + 8);
    return this.db.tx(async (tx) => {
      await assertTenantCap(tx, {
        kind: 'api_keys',
        tenantId,
        countSql: `SELECT count(*)::int AS n FROM api_keys WHERE tenant_id = $1 AND revoked_at IS NULL`,
        max: MAX_ACTIVE_API_KEYS_PER_TENANT,
        code: 'api_key/limit_reached',
        what: 'live API keys; revoke one first',
      });
      const [row] = await tx.query<KeyRow>(
        `INSERT INTO api_keys (tenant_id, name, prefix, key_hash, created_by) VALUES ($1, $2, $3, $4, $5)
         RETURNING id, name, prefix, created_at, revoked_at`,
        [tenantId, cmd.name, prefix, sha256Hex(key), cmd.actor.userId],
      );
      await this.events.audit(tx, { tenantId, type: 'api_key.created', actorType: 'dashboard_user', actorId: cmd.actor.userId, targetType: 'api_key', targetId: row.id, metadata: { prefix } });
      const { revoked_at: _r, ...rest } = toResponse(row);
      return { ...rest, key };
    });
  }
}

export class ListApiKeysQuery extends Query<Page<ApiKeyResponse>> {
  constructor(readonly tenantId: string, readonly limit: number, readonly cursor?: string) {
    super();
  }
}

@QueryHandler(ListApiKeysQuery)
export class ListApiKeysHandler implements IQueryHandler<ListApiKeysQuery> {
  constructor(private readonly db: Db) {}

  async execute(q: ListApiKeysQuery): Promise<Page<ApiKeyResponse>> {
    const list = `api_keys:${q.tenantId}`;
    const pos = keysetPosition(q.cursor, list);
    const rows = await this.db.query<KeyRow & { created_at_text: string }>(
      `SELECT id, name, prefix, created_at, revoked_at, created_at::text AS created_at_text FROM api_keys
        WHERE tenant_id = $1 AND ($2::timestamptz IS NULL OR (created_at, id) < ($2::timestamptz, $3::uuid))
        ORDER BY created_at DESC, id DESC LIMIT $4`,
      [q.tenantId, pos?.[0] ?? null, pos?.[1] ?? null, q.limit + 1],
    );
    return toPage(rows, q.limit, toResponse, (r) => [r.created_at_text, r.id], list);
  }
}

export class RevokeApiKeyCommand extends Command<{ id: string; revoked_at: string }> {
  constructor(readonly actor: DashboardPrincipal, readonly keyId: string) {
    super();
  }
}

/**
 * Conditional on revoked_at IS NULL: a repeat answers the first revocation time, no second event,
 * and tells the caches again (a first revocation whose invalidation failed answered 503).
 */
@CommandHandler(RevokeApiKeyCommand)
export class RevokeApiKeyHandler implements ICommandHandler<RevokeApiKeyCommand> {
  constructor(
    private readonly db: Db,
    private readonly events: EventsService,
    private readonly keys: ApiKeyCache,
  ) {}

  async execute(cmd: RevokeApiKeyCommand): Promise<{ id: string; revoked_at: string }> {
    const tenantId = cmd.actor.tenant!.id;
    const r = await this.db.tx(async (tx) => {
      const [done] = await tx.query<{ revoked_at: Date; key_hash: string }>(
        `UPDATE api_keys SET revoked_at = now() WHERE id = $1 AND tenant_id = $2 AND revoked_at IS NULL RETURNING revoked_at, key_hash`,
        [cmd.keyId, tenantId],
      );
      if (done) {
        await this.events.audit(tx, { tenantId, type: 'api_key.revoked', actorType: 'dashboard_user', actorId: cmd.actor.userId, targetType: 'api_key', targetId: cmd.keyId });
        return { id: cmd.keyId, revoked_at: done.revoked_at.toISOString(), keyHash: done.key_hash };
      }
      const [existing] = await tx.query<{ revoked_at: Date; key_hash: string }>(`SELECT revoked_at, key_hash FROM api_keys WHERE id = $1 AND tenant_id = $2`, [cmd.keyId, tenantId]);
      if (!existing) throw new AppError('api_key/not_found');
      return { id: cmd.keyId, revoked_at: existing.revoked_at.toISOString(), keyHash: existing.key_hash };
    });
    // the key stops working for every API process before this answers
    requireInvalidated(await this.keys.invalidate([r.keyHash]));
    return { id: r.id, revoked_at: r.revoked_at };
  }
}
