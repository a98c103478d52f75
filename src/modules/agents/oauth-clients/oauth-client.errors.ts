import { Queryable } from '../../../shared/db/db.service';
import { AppError } from '../../../shared/errors/app-error';
import { UuidParam } from '../../../shared/http/uuid-param';
import { ClientRow, OAUTH_CLIENT_COLUMNS } from './oauth-clients.dto';

/** A path id that must be a UUID; anything else is the same 404 as an unknown client or another tenant's. */
export const OAuthClientIdParam = (name: string) => UuidParam(name, 'oauth_client/not_found');

/** The tenant's legacy OAuth client (any state), or 404 oauth_client/not_found (also for another tenant's id). */
export async function findTenantOAuthClient(q: Queryable, tenantId: string, clientId: string): Promise<ClientRow> {
  const [row] = await q.query<ClientRow>(`SELECT ${OAUTH_CLIENT_COLUMNS} FROM oauth_clients WHERE id = $1 AND tenant_id = $2`, [clientId, tenantId]);
  if (!row) throw new AppError('oauth_client/not_found');
  return row;
}
