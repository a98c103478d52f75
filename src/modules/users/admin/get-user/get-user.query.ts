import { Query } from '@nestjs/cqrs';
import { EndUserResponse } from '../end-user.response.dto';

/** One end user of the tenant; another tenant's id is 404 user/not_found, like an unknown one. */
export class GetUserQuery extends Query<EndUserResponse> {
  constructor(
    readonly tenantId: string,
    readonly userId: string,
  ) {
    super();
  }
}
