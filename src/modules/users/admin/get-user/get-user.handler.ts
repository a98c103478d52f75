import { IQueryHandler, QueryHandler } from '@nestjs/cqrs';
import { Db } from '../../../../shared/db/db.service';
import { EndUserResponse, findTenantUser, toEndUserResponse } from '../end-user.response.dto';
import { GetUserQuery } from './get-user.query';

@QueryHandler(GetUserQuery)
export class GetUserHandler implements IQueryHandler<GetUserQuery> {
  constructor(private readonly db: Db) {}

  async execute(q: GetUserQuery): Promise<EndUserResponse> {
    return toEndUserResponse(await findTenantUser(this.db, q.tenantId, q.userId));
  }
}
