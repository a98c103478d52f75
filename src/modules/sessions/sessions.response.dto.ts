import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { TokenResponse, TokenUser } from './sessions.service';

// OpenAPI documentation of the token response (contract "Tokens"); the handlers answer the interfaces.

export class TokenUserDto implements TokenUser {
  @ApiProperty({ format: 'uuid' }) id!: string;
  @ApiProperty({ type: String, format: 'email', nullable: true, description: 'null for guests' }) email!: string | null;
  @ApiProperty() email_verified!: boolean;
  @ApiProperty() is_anonymous!: boolean;
  @ApiProperty({ format: 'date-time' }) created_at!: string;
}

/** `{access_token, refresh_token, expires_in, token_type: "Bearer", user}`. */
export class TokenResponseDto implements TokenResponse {
  @ApiProperty({ description: 'RS256 JWT' }) access_token!: string;
  @ApiProperty({ description: '`<id>:<secret>`; every refresh rotates it' }) refresh_token!: string;
  @ApiProperty({ type: 'integer', description: 'access token lifetime in seconds' }) expires_in!: number;
  @ApiProperty({ enum: ['Bearer'] }) token_type!: 'Bearer';
  @ApiProperty({ type: TokenUserDto }) user!: TokenUserDto;
}

/**
 * A token response plus the oauth_params given when a passwordless link or code was requested
 * (magic-link and email-code verify, and the MFA verify that finishes such a sign-in).
 */
export class PasswordlessTokenResponseDto extends TokenResponseDto {
  @ApiPropertyOptional({ type: 'object', additionalProperties: { type: 'string' }, description: 'the oauth_params of the request, to resume the OAuth flow' })
  oauth_params?: Record<string, string>;
}
