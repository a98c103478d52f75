import { IQueryHandler, QueryHandler } from '@nestjs/cqrs';
import { Db } from '../../../shared/db/db.service';
import { findTenantOAuthClient } from './oauth-client.errors';
import { OAuthClientResponse, toOAuthClientResponse } from './oauth-clients.dto';
import { GetOAuthClientQuery } from './get-oauth-client.query';

@QueryHandler(GetOAuthClientQuery)
export class GetOAuthClientHandler implements IQueryHandler<GetOAuthClientQuery> {
  constructor(private readonly db: Db) {}

  async execute(q: GetOAuthClientQuery): Promise<OAuthClientResponse> {
    return toOAuthClientResponse(await findTenantOAuthClient(this.db, q.tenantId, q.clientId));
  }
}
