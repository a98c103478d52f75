import { ApiProperty } from '@nestjs/swagger';
import { UserRole, USER_ROLES } from './settings/anonymous-settings.dto';
import { AnonymousSigninResponse } from './anonymous-signin/anonymous-signin.request.dto';
import { AnonymousSettingsResponse } from './settings/anonymous-settings.dto';

// OpenAPI documentation of the guest answers; the handlers answer the interfaces.

export class AnonymousUserDto {
  @ApiProperty({ format: 'uuid', description: 'opaque; preserved when the guest is claimed' }) id!: string;
  @ApiProperty({ enum: [true], description: 'always true' }) is_anonymous!: true;
  @ApiProperty({ format: 'date-time' }) created_at!: string;
}

/** spec 2.3 anonymous sign-in response: exactly these fields, all required. */
export class AnonymousSigninResponseDto implements AnonymousSigninResponse {
  @ApiProperty({ description: 'RS256 JWT with is_anonymous true and aal AAL1' }) access_token!: string;
  @ApiProperty({ description: '`<id>:<secret>`' }) refresh_token!: string;
  @ApiProperty({ type: 'integer', description: 'access token lifetime in seconds' }) expires_in!: number;
  @ApiProperty({ enum: ['Bearer'] }) token_type!: 'Bearer';
  @ApiProperty({ type: AnonymousUserDto }) user!: AnonymousUserDto;
}

/** Guest sign-in settings of a tenant (spec UpdateTenantAnonymousSettingsRequest plus default_user_role). */
export class AnonymousSettingsResponseDto implements AnonymousSettingsResponse {
  @ApiProperty() anonymous_signins_enabled!: boolean;
  @ApiProperty({ type: 'integer', minimum: 1, maximum: 180, description: 'days of inactivity before a guest is purged' }) anonymous_user_ttl_days!: number;
  @ApiProperty({ enum: USER_ROLES, description: "role of new end users (guests included)" }) default_user_role!: UserRole;
}
