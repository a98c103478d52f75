import { ApiPropertyOptional } from '@nestjs/swagger';
import { IsBoolean, IsIn, IsInt, Max, Min } from 'class-validator';
import { Present } from '../../../shared/http/presence';

export const USER_ROLES = ['read_only', 'member', 'admin'] as const;
export type UserRole = (typeof USER_ROLES)[number];

/** spec UpdateTenantAnonymousSettingsRequest, plus default_user_role (contract "Tenant settings"). */
export class UpdateAnonymousSettingsDto {
  @ApiPropertyOptional() @Present() @IsBoolean() anonymous_signins_enabled?: boolean;
  @ApiPropertyOptional({ type: 'integer', minimum: 1, maximum: 180, default: 30 }) @Present() @IsInt() @Min(1) @Max(180) anonymous_user_ttl_days?: number;
  @ApiPropertyOptional({ enum: USER_ROLES }) @Present() @IsIn(USER_ROLES) default_user_role?: UserRole;
}

export interface AnonymousSettingsResponse {
  anonymous_signins_enabled: boolean;
  anonymous_user_ttl_days: number;
  default_user_role: UserRole;
}
