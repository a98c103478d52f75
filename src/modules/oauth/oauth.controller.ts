import { Controller, Header, Headers, HttpCode, Post } from '@nestjs/common';
import { CommandBus, QueryBus } from '@nestjs/cqrs';
import {
  ApiSecurity,
  ApiBadRequestResponse,
  ApiBody,
  ApiConsumes,
  ApiHeader,
  ApiOkResponse,
  ApiOperation,
  ApiServiceUnavailableResponse,
  ApiTags,
  ApiTooManyRequestsResponse,
  ApiUnauthorizedResponse,
} from '@nestjs/swagger';
import { ClientInfo, ClientInfoValue } from '../../shared/auth/auth-context';
import { OAUTH_CLIENT_BASIC } from '../../shared/http/api-docs';
import { IntrospectionResponse, IntrospectTokenQuery } from './introspect/introspect-token.query';
import { IntrospectionResponseDto, OAuthErrorDto, TokenExchangeRequestDto, TokenExchangeResponseDto, TokenRequestDto } from './oauth.dto';
import { FormParams, OAuthForm } from './oauth-form';
import { RevokeTokenCommand } from './revoke/revoke-token.command';
import { ExchangeTokenCommand, TokenExchangeResponse } from './token-exchange/exchange-token.command';

const FORM = 'application/x-www-form-urlencoded';

@ApiTags('oauth')
@Controller('oauth')
@ApiBadRequestResponse({ type: OAuthErrorDto, description: 'RFC 6749 section 5.2 error: invalid_request' })
@ApiUnauthorizedResponse({
  type: OAuthErrorDto,
  description: 'invalid_client (failed client authentication, whatever the method; a bad X-API-Key at introspection and revocation)',
  headers: { 'WWW-Authenticate': { description: '`Basic realm="oauth", charset="UTF-8"` on every 401 (RFC 6749 section 5.2, RFC 9110 section 15.5.2)', schema: { type: 'string' } } },
})
@ApiServiceUnavailableResponse({ type: OAuthErrorDto, description: 'temporarily_unavailable: revocation state or limiter unreachable (fail closed)' })
export class OAuthController {
  constructor(
    private readonly commandBus: CommandBus,
    private readonly queryBus: QueryBus,
  ) {}

  @Post('token')
  @HttpCode(200)
  @Header('Cache-Control', 'no-store')
  @Header('Pragma', 'no-cache')
  @ApiConsumes(FORM)
  @ApiBody({ type: TokenExchangeRequestDto })
  @ApiSecurity(OAUTH_CLIENT_BASIC)
  @ApiOkResponse({ type: TokenExchangeResponseDto })
  @ApiBadRequestResponse({
    type: OAuthErrorDto,
    description:
      'RFC 6749 section 5.2 error: invalid_request (malformed or missing parameter, actor_token sent), invalid_grant (subject token invalid or revoked, generic description), ' +
      'unauthorized_client (not a confidential agent client, tier or grant type not allowed), unsupported_grant_type, invalid_scope, invalid_target (resource sent, bad audience)',
  })
  @ApiTooManyRequestsResponse({
    type: OAuthErrorDto,
    description:
      'slow_down with Retry-After: 60 per minute per agent client (override up to 600), 10 per minute per subject token jti; ' +
      'the agent already holds agent_settings.max_concurrent_tokens unexpired tokens (Retry-After: until the oldest expires)',
    headers: {
      'Retry-After': { description: 'seconds to wait before retrying', schema: { type: 'integer' } },
      'X-Service-Docs': { description: 'URL of the rate limits documentation', schema: { type: 'string', format: 'uri' } },
    },
  })
  @ApiOperation({
    summary: 'Token exchange (RFC 8693, spec 4.3): a user access token becomes a narrowed agent token',
    description:
      'Client authentication: HTTP Basic (client_secret_basic) or client_id and client_secret in the body (client_secret_post), not both. ' +
      "An exchange in the same second as the agent's kill-tokens waits server-side for the next second (at most about 1 s) and issues a token whose iat is after the kill. " +
      '503 temporarily_unavailable when the revocation state cannot be read (nothing is issued).',
  })
  token(@OAuthForm() form: FormParams, @Headers('authorization') authorization: string | undefined, @ClientInfo() client: ClientInfoValue): Promise<TokenExchangeResponse> {
    return this.commandBus.execute(new ExchangeTokenCommand(form, authorization, client));
  }

  @Post('introspect')
  @HttpCode(200)
  @Header('Cache-Control', 'no-store')
  @Header('Pragma', 'no-cache')
  @ApiConsumes(FORM)
  @ApiBody({ type: TokenRequestDto })
  @ApiSecurity(OAUTH_CLIENT_BASIC)
  @ApiSecurity('api_key')
  @ApiHeader({ name: 'X-API-Key', required: false, description: 'instead of client credentials' })
  @ApiOkResponse({ type: IntrospectionResponseDto })
  @ApiOperation({
    summary: 'Token introspection (RFC 7662) for resource servers',
    description: 'The caller authenticates as a confidential client of the tenant (HTTP Basic or body) or with the tenant X-API-Key. Tokens of another tenant, of a denylisted agent, of an (agent, user) pair the user revoked, or of an ended session are {"active": false}.',
  })
  introspect(@OAuthForm() form: FormParams, @Headers('authorization') authorization: string | undefined, @Headers('x-api-key') apiKey: string | undefined): Promise<IntrospectionResponse> {
    return this.queryBus.execute(new IntrospectTokenQuery(form, authorization, apiKey));
  }

  @Post('revoke')
  @HttpCode(200)
  @Header('Cache-Control', 'no-store')
  @Header('Pragma', 'no-cache')
  @ApiConsumes(FORM)
  @ApiBody({ type: TokenRequestDto })
  @ApiSecurity(OAUTH_CLIENT_BASIC)
  @ApiSecurity('api_key')
  @ApiHeader({ name: 'X-API-Key', required: false, description: 'instead of client credentials' })
  @ApiOkResponse({ description: 'empty body: revoked, or not a valid token of the tenant (RFC 7009 section 2.2)' })
  @ApiBadRequestResponse({ type: OAuthErrorDto, description: 'RFC 6749 section 5.2 error: invalid_request (token missing), unauthorized_client (the client may not revoke this token)' })
  @ApiOperation({
    summary: 'Token revocation (RFC 7009)',
    description: 'Agent access tokens: by their agent client or the tenant X-API-Key. User access tokens and refresh tokens: by the tenant X-API-Key (a refresh token ends its session).',
  })
  async revoke(
    @OAuthForm() form: FormParams,
    @Headers('authorization') authorization: string | undefined,
    @Headers('x-api-key') apiKey: string | undefined,
    @ClientInfo() client: ClientInfoValue,
  ): Promise<void> {
    await this.commandBus.execute(new RevokeTokenCommand(form, authorization, apiKey, client));
  }
}
