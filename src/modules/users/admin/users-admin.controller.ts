import { Controller, Delete, Get, HttpCode, Query } from '@nestjs/common';
import { CommandBus, QueryBus } from '@nestjs/cqrs';
import { ApiNoContentResponse, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { CurrentDashboard, DashboardPrincipal } from '../../../shared/auth/auth-context';
import { DashboardAuth } from '../../../shared/auth/dashboard.guard';
import { Page } from '../../../shared/db/pagination';
import { ApiPageResponse, ApiProblems, Problems } from '../../../shared/http/api-docs';
import { UuidParam } from '../../../shared/http/uuid-param';
import { DeleteUserCommand } from './delete-user/delete-user.command';
import { EndUserResponse, EndUserResponseDto } from './end-user.response.dto';
import { GetUserQuery } from './get-user/get-user.query';
import { ListUsersQuery } from './list-users/list-users.query';
import { ListUsersRequestDto } from './list-users/list-users.request.dto';

/** A user id in the path: malformed, unknown and another tenant's ids are the same 404. */
const UserIdParam = () => UuidParam('userId', 'user/not_found');

/** The tenant's end users, for its administrators: members read, owners erase. */
@ApiTags('end users (tenant admin)')
@Controller('v1/auth/dashboard/tenants/:slug/users')
export class UsersAdminController {
  constructor(
    private readonly commandBus: CommandBus,
    private readonly queryBus: QueryBus,
  ) {}

  @Get()
  @DashboardAuth({ tenant: true })
  @ApiOperation({
    summary: "List the tenant's end users (newest first, cursor-paginated), or find one by email",
    description: 'With `email`, the page holds the user of that address, if any (any spelling of it: compared by its normalized key).',
  })
  @ApiPageResponse(EndUserResponseDto)
  @ApiProblems(...Problems.dashboardRead, ...Problems.tenant, ...Problems.list)
  list(@CurrentDashboard() s: DashboardPrincipal, @Query() q: ListUsersRequestDto): Promise<Page<EndUserResponse>> {
    return this.queryBus.execute(new ListUsersQuery(s.tenant!.id, q.limit ?? 20, q.email, q.cursor));
  }

  @Get(':userId')
  @DashboardAuth({ tenant: true })
  @ApiOperation({ summary: 'One end user of the tenant' })
  @ApiOkResponse({ type: EndUserResponseDto })
  @ApiProblems(...Problems.dashboardRead, ...Problems.tenant, 'user/not_found')
  get(@CurrentDashboard() s: DashboardPrincipal, @UserIdParam() userId: string): Promise<EndUserResponse> {
    return this.queryBus.execute(new GetUserQuery(s.tenant!.id, userId));
  }

  @Delete(':userId')
  @HttpCode(204)
  @DashboardAuth({ tenant: true, owner: true, reauth: true })
  @ApiOperation({
    summary: 'Erase an end user or guest (GDPR Art. 17; owner, after a reauth)',
    description:
      'Deletes the user with its sessions, tokens, codes, MFA factors, agent activity and per-user agent revocations, and its unsent mails, in one transaction; ' +
      'its access and refresh tokens stop working at once. Audited `user.deleted` (no address) and sent to webhooks as `user.deleted` `{user_id}`. ' +
      'The monthly active user count keeps the user. A 503 after the erasure means Redis could not be told yet: send the DELETE again until it answers 404.',
  })
  @ApiNoContentResponse({ description: 'erased' })
  @ApiProblems('auth/reauth_required', ...Problems.dashboardWrite, ...Problems.tenant, ...Problems.owner, 'user/not_found')
  remove(@CurrentDashboard() s: DashboardPrincipal, @UserIdParam() userId: string): Promise<void> {
    return this.commandBus.execute(new DeleteUserCommand(s, userId));
  }
}
