import { ApiProperty } from '@nestjs/swagger';
import { MfaRequiredResponse } from './login/login-user.command';
import { MeResponse } from './me/get-me.query';

// OpenAPI documentation of the end-user answers; the handlers answer the interfaces.

/** GET /v1/auth/me (contract "End users"). */
export class MeResponseDto implements MeResponse {
  @ApiProperty({ format: 'uuid' }) id!: string;
  @ApiProperty({ type: String, format: 'email', nullable: true, description: 'null for guests, and for an agent token whose scope lacks `email`' }) email!: string | null;
  @ApiProperty({ description: 'false for guests, and for an agent token whose scope lacks `email`' }) email_verified!: boolean;
  @ApiProperty() is_anonymous!: boolean;
  @ApiProperty({ example: 'member', description: 'end-user role: read_only, member or admin' }) role!: string;
  @ApiProperty({ format: 'date-time' }) created_at!: string;
  @ApiProperty({ type: String, format: 'date-time', nullable: true }) last_sign_in_at!: string | null;
  @ApiProperty({ type: 'object', additionalProperties: true, description: 'free-form metadata given at guest sign-in' }) public_metadata!: Record<string, unknown>;
}

/** Password (or passwordless) sign-in when MFA applies: finish with POST /v1/auth/mfa/verify. */
export class MfaRequiredResponseDto implements MfaRequiredResponse {
  @ApiProperty({ enum: [true] }) mfa_required!: true;
  @ApiProperty() mfa_challenge_token!: string;
}
