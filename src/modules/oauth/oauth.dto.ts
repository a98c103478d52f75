import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { ACCESS_TOKEN_TYPE, TOKEN_EXCHANGE_GRANT } from './oauth.constants';

// Documentation of the form bodies (application/x-www-form-urlencoded). The handlers read the
// form themselves: RFC 6749 section 3.2 asks unknown parameters to be ignored, and errors must be
// in the RFC 6749 section 5.2 envelope, so these classes are not run through the ValidationPipe.

/** spec 4.3 token-exchange request (RFC 8693 section 2.1). */
export class TokenExchangeRequestDto {
  @ApiProperty({ enum: [TOKEN_EXCHANGE_GRANT] }) grant_type!: string;
  @ApiProperty({ description: "the user's access token (RS256 JWT)" }) subject_token!: string;
  @ApiProperty({ enum: [ACCESS_TOKEN_TYPE] }) subject_token_type!: string;
  @ApiPropertyOptional({ enum: [ACCESS_TOKEN_TYPE] }) requested_token_type?: string;
  @ApiPropertyOptional({ description: 'space-delimited; granted = requested ∩ subject token scope ∩ agent allowlist (default: the subject token scope)' })
  scope?: string;
  @ApiPropertyOptional({ description: 'target service URI, copied into aud (may be repeated)' }) audience?: string;
  @ApiPropertyOptional({ type: 'integer', description: 'requested lifetime in seconds (extension); capped by the agent maximum and 900; default 300' })
  expires_in?: number;
  @ApiPropertyOptional({ description: 'with client_secret when not using HTTP Basic (client_secret_post)' }) client_id?: string;
  @ApiPropertyOptional() client_secret?: string;
  @ApiPropertyOptional({ description: 'rejected: invalid_target' }) resource?: string;
  @ApiPropertyOptional({ description: 'rejected: invalid_request (the actor is the authenticated client)' }) actor_token?: string;
}

/** RFC 8693 section 2.2.1 response. */
export class TokenExchangeResponseDto {
  @ApiProperty() access_token!: string;
  @ApiProperty({ enum: [ACCESS_TOKEN_TYPE] }) issued_token_type!: string;
  @ApiProperty({ enum: ['Bearer'] }) token_type!: string;
  @ApiProperty({ type: 'integer', description: 'seconds' }) expires_in!: number;
  @ApiProperty({ description: 'granted scope, space-delimited' }) scope!: string;
}

/** RFC 6749 section 5.2 error envelope of every /oauth/* endpoint. */
export class OAuthErrorDto {
  @ApiProperty({
    enum: ['invalid_request', 'invalid_client', 'invalid_grant', 'unauthorized_client', 'unsupported_grant_type', 'invalid_scope', 'invalid_target', 'slow_down', 'temporarily_unavailable', 'server_error'],
  })
  error!: string;
  @ApiPropertyOptional() error_description?: string;
}

/** RFC 7662 section 2.1 and RFC 7009 section 2.1 request. */
export class TokenRequestDto {
  @ApiProperty() token!: string;
  @ApiPropertyOptional({ description: 'a hint (RFC 7662 2.1, RFC 7009 2.1): access_token or refresh_token; any other value is ignored, and every kind of token is looked up whatever the hint' })
  token_type_hint?: string;
  @ApiPropertyOptional() client_id?: string;
  @ApiPropertyOptional() client_secret?: string;
}

/** RFC 7662 section 2.2 response. */
export class IntrospectionResponseDto {
  @ApiProperty() active!: boolean;
  @ApiPropertyOptional() scope?: string;
  @ApiPropertyOptional({ description: 'the agent client id (act.sub) of an agent token' }) client_id?: string;
  @ApiPropertyOptional({ enum: ['Bearer'] }) token_type?: string;
  @ApiPropertyOptional({ type: 'integer', description: 'NumericDate' }) exp?: number;
  @ApiPropertyOptional({ type: 'integer', description: 'NumericDate' }) iat?: number;
  @ApiPropertyOptional() sub?: string;
  @ApiPropertyOptional({ oneOf: [{ type: 'string' }, { type: 'array', items: { type: 'string' } }] }) aud?: string | string[];
  @ApiPropertyOptional() iss?: string;
  @ApiPropertyOptional() jti?: string;
  @ApiPropertyOptional() tenant_id?: string;
  @ApiPropertyOptional({ description: '{sub: agent client id}' }) act?: Record<string, string>;
  @ApiPropertyOptional({ type: [String] }) amr?: string[];
  @ApiPropertyOptional() aal?: string;
  @ApiPropertyOptional() role?: string;
  @ApiPropertyOptional() is_anonymous?: boolean;
}
