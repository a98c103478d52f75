import { IQueryHandler, QueryHandler } from '@nestjs/cqrs';
import { Db } from '../../../../shared/db/db.service';
import { keysetPosition, Page, toPage } from '../../../../shared/db/pagination';
import { normalizeEmail } from '../../email';
import { END_USER_COLUMNS, EndUserResponse, EndUserRow, toEndUserResponse } from '../end-user.response.dto';
import { ListUsersQuery } from './list-users.query';

/**
 * Newest first by (created_at, id). The email is compared by its key (normalizeEmail), as every
 * lookup by email is, so any spelling that reaches the account at sign-in finds it here
 * (users_tenant_email_uq); the address is unique per tenant, so such a page holds one user at most.
 */
@QueryHandler(ListUsersQuery)
export class ListUsersHandler implements IQueryHandler<ListUsersQuery> {
  constructor(private readonly db: Db) {}

  async execute(q: ListUsersQuery): Promise<Page<EndUserResponse>> {
    const list = `users:${q.tenantId}`;
    const pos = keysetPosition(q.cursor, list);
    const rows = await this.db.query<EndUserRow & { created_at_text: string }>(
      `SELECT ${END_USER_COLUMNS}, created_at::text AS created_at_text FROM users
        WHERE tenant_id = $1 AND ($2::text IS NULL OR email_normalized = $2)
          AND ($3::timestamptz IS NULL OR (created_at, id) < ($3::timestamptz, $4::uuid))
        ORDER BY created_at DESC, id DESC LIMIT $5`,
      [q.tenantId, q.email === undefined ? null : normalizeEmail(q.email), pos?.[0] ?? null, pos?.[1] ?? null, q.limit + 1],
    );
    return toPage(rows, q.limit, toEndUserResponse, (r) => [r.created_at_text, r.id], list);
  }
}
