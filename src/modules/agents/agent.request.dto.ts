import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import { ArrayMaxSize, ArrayMinSize, ArrayUnique, IsArray, IsInt, IsObject, IsOptional, IsString, Matches, Max, Min, ValidateNested } from 'class-validator';
import { Length, MaxLength } from '../../shared/http/lengths';
import { AGENT_GRANT_TYPES, RATE_LIMIT_OAUTH_AGENT_CEILING } from './agents.service';
import { Present } from '../../shared/http/presence';
import { IsDisplayName, IsPlainText } from '../../shared/http/display-name';
import { IsLogoUrl } from './logo-url';


/** RFC 6749 section 3.3 scope-token: one or more NQCHAR (no space, quote or backslash). */
export const SCOPE_TOKEN = /^[\x21\x23-\x5B\x5D-\x7E]+$/;
/** SCOPE_TOKEN for the OpenAPI document */
export const SCOPE_TOKEN_PATTERN = SCOPE_TOKEN.source;

const limit = (key: string) =>
  ApiPropertyOptional({ type: 'integer', minimum: 1, maximum: RATE_LIMIT_OAUTH_AGENT_CEILING, description: `per-minute override of ${key}; hard ceiling RATE_LIMIT_OAUTH_AGENT_CEILING (600)` });

/** spec 2.10 agent_settings.rate_limits: only these keys, each 1-600 per minute. */
export class AgentRateLimitsDto {
  @limit('token exchanges') @Present() @IsInt() @Min(1) @Max(RATE_LIMIT_OAUTH_AGENT_CEILING) token_exchange_per_min?: number;
  @limit('CIBA initiations') @Present() @IsInt() @Min(1) @Max(RATE_LIMIT_OAUTH_AGENT_CEILING) ciba_initiate_per_min?: number;
  @limit('device code requests') @Present() @IsInt() @Min(1) @Max(RATE_LIMIT_OAUTH_AGENT_CEILING) device_code_per_min?: number;
  @limit('client credentials grants') @Present() @IsInt() @Min(1) @Max(RATE_LIMIT_OAUTH_AGENT_CEILING) client_credentials_per_min?: number;
  @ApiPropertyOptional({
    type: 'integer',
    minimum: 1,
    maximum: RATE_LIMIT_OAUTH_AGENT_CEILING,
    description:
      'bearer API calls per minute made with any of the agent\'s tokens (all users together); only calls with an accepted token count (a revoked or killed token is 401 and uses up nothing); ' +
      'beyond it 429 rate_limit/exceeded with Retry-After and X-Service-Docs, and agent.rate_limited (limit_scope api_calls) once per refusal window. Unset: no limit. A change takes effect within AGENT_LIMITS_LOCAL_TTL_SECONDS (default 5 s)',
  })
  @Present() @IsInt() @Min(1) @Max(RATE_LIMIT_OAUTH_AGENT_CEILING) api_calls_per_min?: number;
}

/** spec 2.10 agent_settings. */
export class AgentSettingsDto {
  @ApiPropertyOptional({
    type: AgentRateLimitsDto,
    description:
      'the agent\'s whole set of per-minute overrides: on PATCH it replaces the stored set (a key left out goes back to its default; send every override you keep), ' +
      'so that an override can be removed; max_concurrent_tokens is set apart',
  })
  @Present() @IsObject() @ValidateNested() @Type(() => AgentRateLimitsDto)
  rate_limits?: AgentRateLimitsDto;

  @ApiPropertyOptional({
    type: 'integer',
    minimum: 1,
    maximum: 100000,
    nullable: true,
    description:
      'at most this many unexpired agent tokens at once (all users together); a token exchange beyond it is 429 slow_down with Retry-After until the oldest live token expires, ' +
      'and agent.rate_limited (limit_scope max_concurrent_tokens) once per minute. Set on an agent that already has live tokens, it counts them (read from the issued tokens; ' +
      'a token whose expiry is not recorded counts for 900 s after its issuance). kill-tokens and revoke free every slot. Unset or null (PATCH clears it): no limit',
  })
  @IsOptional() @IsInt() @Min(1) @Max(100000)
  max_concurrent_tokens?: number | null;
}

/**
 * Fields shared by registration and PATCH (spec 2.10). Grant types outside the 7.4 allowlist
 * (422 agent/invalid_grant_type) and non-empty redirect_uris (422 agent/invalid_field) are
 * refused by the handlers, with the spec's codes; every other constraint is a 400.
 */
export class AgentFieldsDto {
  @ApiPropertyOptional({ type: String, maxLength: 1000, nullable: true, description: 'free text; tabs and line breaks allowed, no other control characters, no bidirectional overrides' })
  @IsOptional() @IsString() @MaxLength(1000) @IsPlainText()
  description?: string | null;

  @ApiPropertyOptional({
    type: String,
    minLength: 1,
    maxLength: 64,
    nullable: true,
    example: 'mcp-server',
    description: 'a kind label, shown to end users: at least one visible character; no control characters, line separators or bidirectional overrides',
  })
  @IsOptional() @IsString() @Length(1, 64) @IsDisplayName()
  agent_class?: string | null;

  @ApiPropertyOptional({
    type: String,
    format: 'uri',
    maxLength: 2048,
    nullable: true,
    description: 'shown to end users (agent_logo_url): an https URL of a public host (a name or a public IP address), without credentials or fragment',
  })
  @IsOptional() @IsString() @MaxLength(2048) @IsLogoUrl()
  logo_url?: string | null;

  @ApiPropertyOptional({
    type: 'array',
    items: { type: 'string', minLength: 1, maxLength: 128, pattern: SCOPE_TOKEN_PATTERN },
    maxItems: 100,
    uniqueItems: true,
    description: 'the scopes the agent may ever be granted (the allowlist of the exchange intersection); each an RFC 6749 scope-token of 1-128 characters',
  })
  @Present() @IsArray() @ArrayMaxSize(100) @ArrayUnique() @IsString({ each: true }) @Length(1, 128, { each: true })
  @Matches(SCOPE_TOKEN, { each: true, message: 'each scope must be an RFC 6749 scope-token' })
  scopes?: string[];

  @ApiPropertyOptional({
    type: [String],
    enum: AGENT_GRANT_TYPES,
    minItems: 1,
    maxItems: 10,
    uniqueItems: true,
    description: 'each from the spec 7.4 allowlist, else 422 agent/invalid_grant_type; at least one (disable is the one way to clear them)',
  })
  @Present() @IsArray() @ArrayMinSize(1, { message: 'grant_types needs at least one grant type; to stop an agent exchanging tokens, use its disable action' })
  // no length bound of its own: a value outside the allowlist, however long, is 422 (spec 7.4)
  @ArrayMaxSize(10) @ArrayUnique() @IsString({ each: true })
  grant_types?: string[];

  @ApiPropertyOptional({ type: 'integer', minimum: 60, maximum: 900, default: 900 }) @Present() @IsInt() @Min(60) @Max(900) agent_token_max_ttl_sec?: number;

  @ApiPropertyOptional({ type: AgentSettingsDto })
  @Present() @IsObject() @ValidateNested() @Type(() => AgentSettingsDto)
  agent_settings?: AgentSettingsDto;

  @ApiPropertyOptional({ type: [String], maxItems: 0, description: 'agents are headless: must be empty or absent, else 422 agent/invalid_field' })
  @Present() @IsArray()
  redirect_uris?: unknown[];
}

/** spec 2.10 agent registration request. */
export class RegisterAgentRequestDto extends AgentFieldsDto {
  @ApiProperty({ minLength: 1, maxLength: 100, description: 'at least one visible character; no control characters, line separators or bidirectional overrides' }) @IsString() @Length(1, 100) @IsDisplayName() name!: string;
}

/** spec 4.4 PATCH: partial agent fields. */
export class UpdateAgentRequestDto extends AgentFieldsDto {
  @ApiPropertyOptional({ minLength: 1, maxLength: 100, description: 'at least one visible character; no control characters, line separators or bidirectional overrides' }) @Present() @IsString() @Length(1, 100) @IsDisplayName() name?: string;
}
