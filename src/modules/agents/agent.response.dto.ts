import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { AgentRateLimitsDto } from './agent.request.dto';
import { AgentRateLimits } from './agents.service';

/** The columns every agent answer is built from. */
export const AGENT_COLUMNS = `id, tenant_id, name, description, agent_class, logo_url, scopes, grant_types, agent_token_max_ttl_sec,
  rate_limits, max_concurrent_tokens, agent_metadata_version, created_at, updated_at, disabled_at, revoked_at`;

export interface AgentRow {
  id: string;
  tenant_id: string;
  name: string;
  description: string | null;
  agent_class: string | null;
  logo_url: string | null;
  scopes: string[];
  grant_types: string[];
  agent_token_max_ttl_sec: number;
  rate_limits: AgentRateLimits;
  max_concurrent_tokens: number | null;
  agent_metadata_version: number;
  created_at: Date;
  updated_at: Date;
  disabled_at: Date | null;
  revoked_at: Date | null;
}

export class AgentSettingsResponse {
  @ApiProperty({ type: AgentRateLimitsDto, description: 'per-minute overrides (spec 2.10 keys); absent keys use the defaults' }) rate_limits!: AgentRateLimits;
  @ApiProperty({ type: 'integer', nullable: true }) max_concurrent_tokens!: number | null;
}

/** AgentResponse (spec 2.10): the agent client record; `id` is also its OAuth client_id. */
export class AgentResponse {
  @ApiProperty({ format: 'uuid' }) id!: string;
  @ApiProperty({ format: 'uuid', description: 'the OAuth client_id (equals id)' }) client_id!: string;
  @ApiProperty({ enum: ['agent'], description: 'agent clients are confidential (spec 5 rule 2)' }) client_type!: 'agent';
  @ApiProperty() name!: string;
  @ApiProperty({ type: String, nullable: true }) description!: string | null;
  @ApiProperty({ type: String, nullable: true }) agent_class!: string | null;
  @ApiProperty({ type: String, nullable: true }) logo_url!: string | null;
  @ApiProperty({ type: [String] }) scopes!: string[];
  @ApiProperty({ type: [String] }) grant_types!: string[];
  @ApiProperty({ type: [String], maxItems: 0 }) redirect_uris!: string[];
  @ApiProperty({ type: 'integer', minimum: 60, maximum: 900 }) agent_token_max_ttl_sec!: number;
  @ApiProperty({ type: AgentSettingsResponse }) agent_settings!: AgentSettingsResponse;
  @ApiProperty({ type: 'integer', minimum: 1, description: 'incremented on each PATCH' }) agent_metadata_version!: number;
  @ApiProperty({ format: 'date-time' }) created_at!: string;
  @ApiProperty({ format: 'date-time' }) updated_at!: string;
  @ApiProperty({ type: String, format: 'date-time', nullable: true, description: 'set by the disable action (grant types cleared)' }) disabled_at!: string | null;
  @ApiProperty({ type: String, format: 'date-time', nullable: true }) revoked_at!: string | null;
}

/** Registration and rotate-secret: the record plus the secret, revealed once (only its SHA-256 is stored). */
export class AgentWithSecretResponse extends AgentResponse {
  @ApiProperty({ description: 'shown once; use it server-side only (spec 5 rule 4)' }) client_secret!: string;
}

/** DELETE answer (spec 4.4). */
export class RevokeAgentResponse {
  @ApiProperty({ format: 'uuid' }) id!: string;
  @ApiProperty() name!: string;
  @ApiProperty({ format: 'date-time', description: 'the first revocation time, unchanged on repeat calls' }) revoked_at!: string;
  @ApiProperty({ type: 'integer' }) agent_metadata_version!: number;
}

/** kill-tokens answer (contract): tokens issued before `not_before` are refused until `denylisted_until`. */
export class KillAgentTokensResponse {
  @ApiProperty({ format: 'uuid' }) id!: string;
  @ApiProperty({ format: 'date-time' }) not_before!: string;
  @ApiProperty({ format: 'date-time' }) denylisted_until!: string;
}

/** AgentActionResponse (spec 2.10): IP and user agent only as 12-hex keyed (HMAC-SHA256) prefixes. */
export class AgentActionResponse {
  @ApiProperty({ format: 'uuid' }) id!: string;
  @ApiProperty() action!: string;
  @ApiPropertyOptional({ format: 'uuid' }) actor_user_id?: string;
  @ApiPropertyOptional({ format: 'email' }) actor_user_email?: string;
  @ApiPropertyOptional() resource?: string;
  @ApiPropertyOptional() method_or_event?: string;
  @ApiPropertyOptional() jti?: string;
  @ApiPropertyOptional() scope_used?: string;
  @ApiPropertyOptional({ minLength: 12, maxLength: 12, pattern: '^[0-9a-f]{12}$', description: 'HMAC-SHA256 of the client IP under a server secret, 12 hex; equal for equal addresses, not reversible without the secret' })
  ip_hash_prefix?: string;
  @ApiPropertyOptional({ minLength: 12, maxLength: 12, pattern: '^[0-9a-f]{12}$', description: 'HMAC-SHA256 of the User-Agent under a server secret, 12 hex' })
  user_agent_hash_prefix?: string;
  @ApiProperty({ format: 'date-time' }) created_at!: string;
}

const iso = (d: Date | null) => (d ? d.toISOString() : null);

export function toAgentResponse(r: AgentRow): AgentResponse {
  return {
    id: r.id,
    client_id: r.id,
    client_type: 'agent',
    name: r.name,
    description: r.description,
    agent_class: r.agent_class,
    logo_url: r.logo_url,
    scopes: r.scopes,
    grant_types: r.grant_types,
    redirect_uris: [],
    agent_token_max_ttl_sec: r.agent_token_max_ttl_sec,
    agent_settings: { rate_limits: r.rate_limits ?? {}, max_concurrent_tokens: r.max_concurrent_tokens },
    agent_metadata_version: r.agent_metadata_version,
    created_at: r.created_at.toISOString(),
    updated_at: r.updated_at.toISOString(),
    disabled_at: iso(r.disabled_at),
    revoked_at: iso(r.revoked_at),
  };
}
