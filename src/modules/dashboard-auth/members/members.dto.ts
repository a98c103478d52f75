import { ApiProperty } from '@nestjs/swagger';
import { IsIn } from 'class-validator';
import { CursorQuery } from '../../../shared/db/pagination';

export const MEMBER_ROLES = ['owner', 'member'] as const;
export type MemberRole = (typeof MEMBER_ROLES)[number];

export class ListMembersQueryDto extends CursorQuery {}

export class ChangeMemberRoleRequestDto {
  @ApiProperty({ enum: MEMBER_ROLES, description: 'the new role; a tenant keeps at least one owner (409 member/last_owner)' })
  @IsIn(MEMBER_ROLES)
  role!: MemberRole;
}

export class MemberResponseDto {
  @ApiProperty({ format: 'uuid', description: 'the dashboard user' }) user_id!: string;
  @ApiProperty({ format: 'email' }) email!: string;
  @ApiProperty({ enum: MEMBER_ROLES }) role!: MemberRole;
  @ApiProperty({ format: 'date-time', description: 'when the person became a member' }) joined_at!: string;
}

export interface MemberResponse {
  user_id: string;
  email: string;
  role: MemberRole;
  joined_at: string;
}
