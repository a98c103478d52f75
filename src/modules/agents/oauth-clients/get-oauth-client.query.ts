import { Query } from '@nestjs/cqrs';
import { OAuthClientResponse } from './oauth-clients.dto';

/** One legacy OAuth client of the tenant (any state); another tenant's id is 404. */
export class GetOAuthClientQuery extends Query<OAuthClientResponse> {
  constructor(
    readonly tenantId: string,
    readonly clientId: string,
  ) {
    super();
  }
}
