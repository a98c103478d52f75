import { ApiProperty } from '@nestjs/swagger';
import { DashboardSessionResponse } from './dashboard-auth.dto';

// OpenAPI documentation of the dashboard answers; the handlers answer the interfaces.

export class DashboardUserDto {
  @ApiProperty({ format: 'uuid' }) id!: string;
  @ApiProperty({ format: 'email' }) email!: string;
}

export class DashboardMembershipDto {
  @ApiProperty({ format: 'uuid', description: "the tenant's id: the `tenant_id` claim of its users' tokens, which a resource server checks" }) tenant_id!: string;
  @ApiProperty() tenant_slug!: string;
  @ApiProperty({ enum: ['owner', 'member'] }) role!: 'owner' | 'member';
}

/** Dashboard login, invitation accept and GET /v1/auth/dashboard/me. */
export class DashboardSessionResponseDto implements DashboardSessionResponse {
  @ApiProperty({ type: DashboardUserDto }) user!: DashboardUserDto;
  @ApiProperty({ type: [DashboardMembershipDto] }) memberships!: DashboardMembershipDto[];
  @ApiProperty({ description: 'send as X-CSRF-Token on state-changing dashboard requests' }) csrf_token!: string;
}

/** spec 2.7 DashboardReauthResponse. */
export class DashboardReauthResponseDto {
  @ApiProperty({ format: 'date-time' }) verified_at!: string;
}

export class InviteMemberResponseDto {
  @ApiProperty({ description: 'also emailed to the invitee' }) invite_token!: string;
}
