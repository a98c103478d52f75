import { Controller, Delete, Get, HttpCode, Query } from '@nestjs/common';
import { CommandBus, QueryBus } from '@nestjs/cqrs';
import { ApiNoContentResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { CurrentDashboard, DashboardPrincipal } from '../../../shared/auth/auth-context';
import { DashboardAuth } from '../../../shared/auth/dashboard.guard';
import { Page } from '../../../shared/db/pagination';
import { ApiPageResponse, ApiProblems, Problems } from '../../../shared/http/api-docs';
import { UuidParam } from '../../../shared/http/uuid-param';
import { ListInvitesQuery, ListInvitesQueryDto, PendingInviteResponseDto, RevokeInviteCommand } from './pending-invites';

/** The tenant's pending invitations (sending one: POST .../members). */
@ApiTags('dashboard')
@Controller('v1/auth/dashboard/tenants/:slug/invites')
export class InvitesController {
  constructor(
    private readonly commandBus: CommandBus,
    private readonly queryBus: QueryBus,
  ) {}

  @Get()
  @DashboardAuth({ tenant: true })
  @ApiOperation({ summary: 'List the pending invitations (not accepted, not expired; newest first, cursor-paginated)' })
  @ApiPageResponse(PendingInviteResponseDto)
  @ApiProblems(...Problems.dashboardRead, ...Problems.list, ...Problems.tenant)
  list(@CurrentDashboard() s: DashboardPrincipal, @Query() q: ListInvitesQueryDto): Promise<Page<PendingInviteResponseDto>> {
    return this.queryBus.execute(new ListInvitesQuery(s.tenant!.id, q.limit ?? 20, q.cursor));
  }

  @Delete(':inviteId')
  @HttpCode(204)
  @DashboardAuth({ tenant: true, owner: true })
  @ApiOperation({ summary: 'Withdraw a pending invitation (owner); its token is refused from then on' })
  @ApiNoContentResponse({ description: 'withdrawn' })
  @ApiProblems(...Problems.dashboardWrite, ...Problems.tenant, ...Problems.owner, 'invite/not_found')
  revoke(@CurrentDashboard() s: DashboardPrincipal, @UuidParam('inviteId', 'invite/not_found') inviteId: string): Promise<void> {
    return this.commandBus.execute(new RevokeInviteCommand(s, inviteId));
  }
}
