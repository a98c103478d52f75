import { ApiPropertyOptional } from '@nestjs/swagger';
import { Transform } from 'class-transformer';
import { IsInt, IsOptional, IsString, IsUUID, Max, Min } from 'class-validator';
import { Length } from '../../../shared/http/lengths';
import { CURSOR_DESCRIPTION, queryInt } from '../../../shared/db/pagination';
import { IsInstant } from '../../../shared/http/dates';

/** spec 4.4 activity query: cursor, limit (default 50, max 200), since, until, actor_user_id, action_type. */
export class AgentActivityRequestDto {
  @ApiPropertyOptional({ description: CURSOR_DESCRIPTION }) @IsOptional() @IsString() cursor?: string;
  @ApiPropertyOptional({ type: 'integer', minimum: 1, maximum: 200, default: 50 }) @IsOptional() @Transform(queryInt) @IsInt() @Min(1) @Max(200) limit?: number;
  @ApiPropertyOptional({ format: 'date-time', description: 'RFC 3339; actions at or after this instant' }) @IsOptional() @IsInstant() since?: string;
  @ApiPropertyOptional({ format: 'date-time', description: 'RFC 3339; actions before this instant' }) @IsOptional() @IsInstant() until?: string;
  @ApiPropertyOptional({ format: 'uuid', description: 'owners only (members: 403 auth/forbidden)' }) @IsOptional() @IsUUID() actor_user_id?: string;
  @ApiPropertyOptional({ minLength: 1, maxLength: 64, example: 'token_exchange' }) @IsOptional() @IsString() @Length(1, 64) action_type?: string;
}
