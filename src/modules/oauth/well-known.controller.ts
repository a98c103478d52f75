import { Controller, Get, Header, Inject } from '@nestjs/common';
import { RouteConfig } from '@nestjs/platform-fastify';
import { ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { APP_CONFIG, AppConfig } from '../../config/config';
import { JWKS_MAX_AGE_SECONDS, SigningKeysService } from '../../shared/crypto/signing-keys.service';
import { PUBLIC_CORS } from '../../shared/http/public-cors';
import { TOKEN_EXCHANGE_GRANT } from './oauth.constants';

/** OpenID Provider / RFC 8414 metadata, as served (documentation only). */
const METADATA_SCHEMA = {
  type: 'object',
  required: ['issuer', 'jwks_uri', 'token_endpoint', 'grant_types_supported', 'response_types_supported', 'subject_types_supported', 'id_token_signing_alg_values_supported'],
  properties: {
    issuer: { type: 'string', format: 'uri' },
    jwks_uri: { type: 'string', format: 'uri' },
    token_endpoint: { type: 'string', format: 'uri' },
    introspection_endpoint: { type: 'string', format: 'uri' },
    revocation_endpoint: { type: 'string', format: 'uri' },
    grant_types_supported: { type: 'array', items: { type: 'string' } },
    token_endpoint_auth_methods_supported: { type: 'array', items: { type: 'string' } },
    introspection_endpoint_auth_methods_supported: { type: 'array', items: { type: 'string' } },
    revocation_endpoint_auth_methods_supported: { type: 'array', items: { type: 'string' } },
    response_types_supported: { type: 'array', items: { type: 'string' } },
    subject_types_supported: { type: 'array', items: { type: 'string' } },
    id_token_signing_alg_values_supported: { type: 'array', items: { type: 'string' } },
    scopes_supported: { type: 'array', items: { type: 'string' } },
    claims_supported: { type: 'array', items: { type: 'string' } },
    service_documentation: { type: 'string', format: 'uri' },
  },
};

/**
 * Discovery: JWKS, OpenID Provider metadata and RFC 8414 authorization server metadata, listing
 * the token (RFC 8693 exchange), introspection (RFC 7662) and revocation (RFC 7009) endpoints.
 */
@ApiTags('discovery')
@Controller('.well-known')
export class WellKnownController {
  private readonly metadata: Record<string, unknown>;

  constructor(
    private readonly keys: SigningKeysService,
    @Inject(APP_CONFIG) config: AppConfig,
  ) {
    const base = config.PUBLIC_BASE_URL.replace(/\/$/, '');
    this.metadata = {
      issuer: config.PUBLIC_BASE_URL,
      jwks_uri: `${base}/.well-known/jwks.json`,
      token_endpoint: `${base}/oauth/token`,
      introspection_endpoint: `${base}/oauth/introspect`,
      revocation_endpoint: `${base}/oauth/revoke`,
      // the token endpoint serves token exchange only (refresh is POST /v1/auth/refresh, not a grant here)
      grant_types_supported: [TOKEN_EXCHANGE_GRANT],
      token_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post'],
      introspection_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post'],
      revocation_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post'],
      response_types_supported: ['none'],
      subject_types_supported: ['public'],
      id_token_signing_alg_values_supported: ['RS256'],
      scopes_supported: ['openid', 'profile', 'email'],
      claims_supported: [
        'iss', 'sub', 'aud', 'exp', 'iat', 'jti', 'tenant_id', 'sid', 'scope', 'amr', 'aal', 'auth_time', 'role', 'is_anonymous', 'email', 'email_verified', 'act', 'client_id', 'subject_sid',
        // step-up tokens, tokens of the MFA enrollment grace, the enrollment-only token
        'step_up_at', 'mfa_enrollment_required', 'mfa_enrollment_deadline', 'mfa_enrollment_only',
      ],
      service_documentation: `${base}/docs`,
    };
  }

  @Get('jwks.json')
  @Header('Cache-Control', `public, max-age=${JWKS_MAX_AGE_SECONDS}`)
  @RouteConfig({ cors: PUBLIC_CORS })
  @ApiOperation({ summary: 'JSON Web Key Set of the access-token signing keys (one entry per kid)' })
  @ApiOkResponse({
    description: 'RFC 7517 JWK Set (public RSA keys only)',
    schema: {
      type: 'object',
      required: ['keys'],
      properties: {
        keys: {
          type: 'array',
          items: {
            type: 'object',
            required: ['kty', 'kid', 'use', 'alg', 'n', 'e'],
            properties: {
              kty: { type: 'string', enum: ['RSA'] },
              kid: { type: 'string' },
              use: { type: 'string', enum: ['sig'] },
              alg: { type: 'string', enum: ['RS256'] },
              n: { type: 'string' },
              e: { type: 'string' },
            },
          },
        },
      },
    },
  })
  jwks() {
    return this.keys.jwks();
  }

  @Get('openid-configuration')
  @Header('Cache-Control', `public, max-age=${JWKS_MAX_AGE_SECONDS}`)
  @RouteConfig({ cors: PUBLIC_CORS })
  @ApiOperation({ summary: 'OpenID Provider metadata' })
  @ApiOkResponse({ schema: METADATA_SCHEMA })
  openid() {
    return this.metadata;
  }

  @Get('oauth-authorization-server')
  @Header('Cache-Control', `public, max-age=${JWKS_MAX_AGE_SECONDS}`)
  @RouteConfig({ cors: PUBLIC_CORS })
  @ApiOperation({ summary: 'OAuth 2.0 Authorization Server metadata (RFC 8414)' })
  @ApiOkResponse({ schema: METADATA_SCHEMA })
  oauthServer() {
    return this.metadata;
  }
}
