import { ApiPropertyOptional } from '@nestjs/swagger';
import { TokenResponseDto } from '../sessions/sessions.response.dto';

// OpenAPI documentation of the passwordless sign-in answer; the handlers answer PasswordlessResponse.

/** A token response plus the oauth_params given when the link or code was requested. */
export class PasswordlessTokenResponseDto extends TokenResponseDto {
  @ApiPropertyOptional({ type: 'object', additionalProperties: { type: 'string' }, description: 'the oauth_params of the request, to resume the OAuth flow' })
  oauth_params?: Record<string, string>;
}
