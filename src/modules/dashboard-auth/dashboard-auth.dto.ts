import { ApiProperty } from '@nestjs/swagger';
import { IsEmail, IsIn, IsString } from 'class-validator';
import { CURRENT_PASSWORD_LENGTH_DOC, CurrentPasswordLength, Length, MaxLength } from '../../shared/http/lengths';
import { IsEmailAddress } from '../../shared/http/email-address';

/** spec 2.7 DashboardLoginRequest */
export class DashboardLoginRequestDto {
  // IsEmail, not IsEmailAddress: an account whose address predates that check still signs in
  @ApiProperty({ format: 'email', maxLength: 254 }) @IsEmail() @MaxLength(254) email!: string;
  @ApiProperty({ minLength: 8, maxLength: 128, description: CURRENT_PASSWORD_LENGTH_DOC }) @IsString() @CurrentPasswordLength(8, 128) password!: string;
}

/** spec 2.7 DashboardReauthRequest */
export class DashboardReauthRequestDto {
  @ApiProperty({ minLength: 8, maxLength: 128, description: CURRENT_PASSWORD_LENGTH_DOC }) @IsString() @CurrentPasswordLength(8, 128) password!: string;
}

export class InviteMemberRequestDto {
  @ApiProperty({ format: 'email', maxLength: 254 }) @IsEmailAddress() @MaxLength(254) email!: string;
  @ApiProperty({ enum: ['owner', 'member'] }) @IsIn(['owner', 'member']) role!: 'owner' | 'member';
}

export class AcceptInviteRequestDto {
  @ApiProperty({ minLength: 1, maxLength: 512 }) @IsString() @Length(1, 512) token!: string;
  @ApiProperty({ minLength: 8, maxLength: 128, description: `a new account needs 12-128 characters; an existing account its current password (${CURRENT_PASSWORD_LENGTH_DOC})` })
  @IsString() @CurrentPasswordLength(8, 128) password!: string;
}

export interface DashboardSessionResponse {
  user: { id: string; email: string };
  memberships: { tenant_id: string; tenant_slug: string; role: 'owner' | 'member' }[];
  csrf_token: string;
}
