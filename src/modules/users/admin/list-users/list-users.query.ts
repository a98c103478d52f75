import { Query } from '@nestjs/cqrs';
import { Page } from '../../../../shared/db/pagination';
import { EndUserResponse } from '../end-user.response.dto';

/** The tenant's end users, newest first, cursor-paginated; with `email`, the one user of that address (if any). */
export class ListUsersQuery extends Query<Page<EndUserResponse>> {
  constructor(
    readonly tenantId: string,
    readonly limit: number,
    readonly email?: string,
    readonly cursor?: string,
  ) {
    super();
  }
}
