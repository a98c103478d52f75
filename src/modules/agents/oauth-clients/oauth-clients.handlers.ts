import { CanActivate, ExecutionContext, Injectable } from '@nestjs/common';
import { Command, CommandHandler, ICommandHandler, IQueryHandler, Query, QueryHandler } from '@nestjs/cqrs';
import type { FastifyRequest } from 'fastify';
import { DashboardPrincipal } from '../../../shared/auth/auth-context';
import { randomToken, sha256Hex } from '../../../shared/crypto/tokens';
import { Db } from '../../../shared/db/db.service';
import { keysetPosition, Page, toPage } from '../../../shared/db/pagination';
import { AppError } from '../../../shared/errors/app-error';
import { EventsService } from '../../../shared/events/events.service';
import { ClientRow, CreatedOAuthClientResponse, CreateOAuthClientRequestDto, OAUTH_CLIENT_COLUMNS, OAuthClientResponse, toOAuthClientResponse } from './oauth-clients.dto';
import { assertTenantCap } from '../../../shared/db/tenant-cap';

/** Live (not revoked) OAuth clients a tenant may hold (409 oauth_client/limit_reached beyond). */
export const MAX_LIVE_OAUTH_CLIENTS_PER_TENANT = 100;

/**
 * spec 7.4: `client_type: "agent"` on the legacy endpoint is 400 oauth_client/use_agents_endpoint,
 * whatever else the body holds (checked before body validation, which would refuse agent fields).
 */
@Injectable()
export class RejectAgentClientTypeGuard implements CanActivate {
  canActivate(ctx: ExecutionContext): boolean {
    const body = ctx.switchToHttp().getRequest<FastifyRequest>().body as Record<string, unknown> | undefined;
    if (body && typeof body === 'object' && body.client_type === 'agent')
      throw new AppError('oauth_client/use_agents_endpoint', 'Agent clients are registered with POST /v1/auth/dashboard/tenants/{slug}/agents');
    return true;
  }
}

export class CreateOAuthClientCommand extends Command<CreatedOAuthClientResponse> {
  constructor(
    readonly actor: DashboardPrincipal,
    readonly body: CreateOAuthClientRequestDto,
  ) {
    super();
  }
}

@CommandHandler(CreateOAuthClientCommand)
export class CreateOAuthClientHandler implements ICommandHandler<CreateOAuthClientCommand> {
  constructor(
    private readonly db: Db,
    private readonly events: EventsService,
  ) {}

  async execute(cmd: CreateOAuthClientCommand): Promise<CreatedOAuthClientResponse> {
    const tenantId = cmd.actor.tenant!.id;
    const b = cmd.body;
    const grantTypes = b.grant_types ?? ['authorization_code'];
    const fail = (field: string, message: string) => new AppError('request/invalid', message, { errors: [{ field, message }] });
    // RFC 6749 section 4.4: only confidential clients authenticate for client_credentials
    if (b.client_type === 'public' && grantTypes.includes('client_credentials')) throw fail('grant_types', 'public clients cannot use client_credentials');
    const secret = b.client_type === 'confidential' ? randomToken() : undefined;
    return this.db.tx(async (tx) => {
      await assertTenantCap(tx, {
        kind: 'oauth_clients',
        tenantId,
        countSql: `SELECT count(*)::int AS n FROM oauth_clients WHERE tenant_id = $1 AND revoked_at IS NULL`,
        max: MAX_LIVE_OAUTH_CLIENTS_PER_TENANT,
        code: 'oauth_client/limit_reached',
        what: 'live OAuth clients; revoke one first',
      });
      const [row] = await tx.query<ClientRow>(
        `INSERT INTO oauth_clients (tenant_id, name, client_type, redirect_uris, grant_types, scopes, secret_hash)
         VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING ${OAUTH_CLIENT_COLUMNS}`,
        [tenantId, b.name, b.client_type, b.redirect_uris ?? [], grantTypes, b.scopes ?? [], secret ? sha256Hex(secret) : null],
      );
      await this.events.audit(tx, {
        tenantId,
        type: 'oauth_client.created',
        actorType: 'dashboard_user',
        actorId: cmd.actor.userId,
        targetType: 'oauth_client',
        targetId: row.id,
        metadata: { client_type: row.client_type, grant_types: row.grant_types },
      });
      return secret ? { ...toOAuthClientResponse(row), client_secret: secret } : toOAuthClientResponse(row);
    });
  }
}

export class ListOAuthClientsQuery extends Query<Page<OAuthClientResponse>> {
  constructor(
    readonly tenantId: string,
    readonly limit: number,
    readonly cursor?: string,
  ) {
    super();
  }
}

@QueryHandler(ListOAuthClientsQuery)
export class ListOAuthClientsHandler implements IQueryHandler<ListOAuthClientsQuery> {
  constructor(private readonly db: Db) {}

  async execute(q: ListOAuthClientsQuery): Promise<Page<OAuthClientResponse>> {
    const list = `oauth_clients:${q.tenantId}`;
    const pos = keysetPosition(q.cursor, list);
    const rows = await this.db
      .query<ClientRow & { created_at_text: string }>(
        `SELECT ${OAUTH_CLIENT_COLUMNS}, created_at::text AS created_at_text FROM oauth_clients
          WHERE tenant_id = $1 AND ($2::timestamptz IS NULL OR (created_at, id) < ($2::timestamptz, $3::uuid))
          ORDER BY created_at DESC, id DESC LIMIT $4`,
        [q.tenantId, pos?.[0] ?? null, pos?.[1] ?? null, q.limit + 1],
      );
    return toPage(rows, q.limit, toOAuthClientResponse, (r) => [r.created_at_text, r.id], list);
  }
}
