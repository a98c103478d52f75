import { Body, Controller, Delete, Get, HttpCode, Patch, Query } from '@nestjs/common';
import { CommandBus, QueryBus } from '@nestjs/cqrs';
import { ApiNoContentResponse, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { CurrentDashboard, DashboardPrincipal } from '../../../shared/auth/auth-context';
import { DashboardAuth } from '../../../shared/auth/dashboard.guard';
import { Page } from '../../../shared/db/pagination';
import { ApiPageResponse, ApiProblems, Problems } from '../../../shared/http/api-docs';
import { UuidParam } from '../../../shared/http/uuid-param';
import { ChangeMemberRoleRequestDto, ListMembersQueryDto, MemberResponse, MemberResponseDto } from './members.dto';
import { ChangeMemberRoleCommand, ListMembersQuery, RemoveMemberCommand } from './members.handlers';

/** The tenant's dashboard members (invitations: POST .../members on the dashboard controller). */
@ApiTags('dashboard')
@Controller('v1/auth/dashboard/tenants/:slug/members')
export class MembersController {
  constructor(
    private readonly commandBus: CommandBus,
    private readonly queryBus: QueryBus,
  ) {}

  @Get()
  @DashboardAuth({ tenant: true })
  @ApiOperation({ summary: 'List the tenant\'s dashboard members (newest first, cursor-paginated)' })
  @ApiPageResponse(MemberResponseDto)
  @ApiProblems(...Problems.dashboardRead, ...Problems.list, ...Problems.tenant)
  list(@CurrentDashboard() s: DashboardPrincipal, @Query() q: ListMembersQueryDto): Promise<Page<MemberResponse>> {
    return this.queryBus.execute(new ListMembersQuery(s.tenant!.id, q.limit ?? 20, q.cursor));
  }

  @Patch(':userId')
  @HttpCode(200)
  @DashboardAuth({ tenant: true, owner: true, reauth: true })
  @ApiOperation({ summary: 'Change a member\'s role (owner, after a reauth); the last owner cannot step down (409 member/last_owner)' })
  @ApiOkResponse({ type: MemberResponseDto })
  @ApiProblems('auth/reauth_required', ...Problems.dashboardWrite, ...Problems.input, ...Problems.tenant, ...Problems.owner, 'member/not_found', 'member/last_owner')
  changeRole(@CurrentDashboard() s: DashboardPrincipal, @UuidParam('userId', 'member/not_found') userId: string, @Body() body: ChangeMemberRoleRequestDto): Promise<MemberResponse> {
    return this.commandBus.execute(new ChangeMemberRoleCommand(s, userId, body.role));
  }

  @Delete(':userId')
  @HttpCode(204)
  @DashboardAuth({ tenant: true, owner: 'or-self', reauth: true })
  @ApiOperation({
    summary: 'Remove a member (owner), or leave the tenant (any member, their own user id); after a reauth',
    description: 'The person loses the tenant at their next request; their account and other memberships stay. Any member may remove themself (leave), unless the last owner (409 member/last_owner); only owners remove others (403 auth/forbidden). Audited as dashboard.member_removed, or dashboard.member_left.',
  })
  @ApiNoContentResponse({ description: 'removed' })
  @ApiProblems('auth/reauth_required', ...Problems.dashboardWrite, ...Problems.tenant, ...Problems.owner, 'member/not_found', 'member/last_owner')
  remove(@CurrentDashboard() s: DashboardPrincipal, @UuidParam('userId', 'member/not_found') userId: string): Promise<void> {
    return this.commandBus.execute(new RemoveMemberCommand(s, userId));
  }
}
