import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { CursorQuery } from '../../../shared/db/pagination';

/** GET /v1/users/me/agents query: cursor, limit (default 20, max 100). */
export class ListMyAgentsRequestDto extends CursorQuery {}

/** UserAgentResponse (spec 2.10). */
export class UserAgentResponse {
  @ApiProperty({ format: 'uuid' }) agent_client_id!: string;
  @ApiProperty() agent_name!: string;
  @ApiPropertyOptional({ format: 'uri' }) agent_logo_url?: string;
  @ApiPropertyOptional() agent_class?: string;
  @ApiPropertyOptional({ format: 'date-time' }) last_action_at?: string;
  @ApiProperty({ type: 'integer', minimum: 0 }) action_count!: number;
  @ApiPropertyOptional({ format: 'date-time', description: 'set when this user revoked the agent' }) revoked_at?: string;
  @ApiPropertyOptional({ format: 'date-time', description: 'set when a tenant admin revoked the agent' }) agent_revoked_at?: string;
}

/** RevokeMyAgentResponse (spec 2.10). */
export class RevokeMyAgentResponse {
  @ApiProperty({ format: 'uuid' }) agent_client_id!: string;
  @ApiProperty({ format: 'date-time', description: 'unchanged on a repeat call' }) revoked_at!: string;
  @ApiProperty({ enum: ['gdpr_art_7_withdrawal'] }) reason!: string;
}

/** RestoreMyAgentResponse (spec 2.10). */
export class RestoreMyAgentResponse {
  @ApiProperty({ format: 'uuid' }) agent_client_id!: string;
  @ApiProperty({ format: 'date-time', description: 'the current time on a no-op' }) restored_at!: string;
  @ApiProperty({ description: 'false when the agent was not revoked by this user (no audit event)' }) newly_restored!: boolean;
  @ApiPropertyOptional({ enum: ['tenant'], description: 'present only when restored but the tenant still blocks the agent' }) still_blocked_by?: 'tenant';
}
