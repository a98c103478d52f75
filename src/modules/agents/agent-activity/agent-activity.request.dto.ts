import { ApiPropertyOptional } from '@nestjs/swagger';
import { Transform } from 'class-transformer';
import { IsInt, IsOptional, IsString, IsUUID, Length, Max, Min, ValidateBy, ValidationOptions } from 'class-validator';
import { CURSOR_DESCRIPTION, queryInt } from '../../../shared/db/pagination';

// RFC 3339 section 5.6 (a space may stand for the T, as its note allows; any number of fraction digits)
const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-](\d{2}):(\d{2}))$/;

/** An RFC 3339 date-time that names a real instant: a calendar date (no 30 February), hours, minutes and seconds in range, year 1 to 9999. */
export function isInstant(value: unknown): boolean {
  const m = typeof value === 'string' ? RFC3339.exec(value) : null;
  if (!m) return false;
  const [y, mo, d, h, mi, s] = m.slice(1, 7).map(Number);
  const day = new Date(Date.UTC(2000, mo - 1, d));
  day.setUTCFullYear(y);
  const offsetOk = m[9] === undefined || (Number(m[9]) <= 23 && Number(m[10]) <= 59);
  return y >= 1 && day.getUTCFullYear() === y && day.getUTCMonth() === mo - 1 && day.getUTCDate() === d && h <= 23 && mi <= 59 && s <= 59 && offsetOk;
}

const IsInstant = (options?: ValidationOptions): PropertyDecorator =>
  ValidateBy({ name: 'isInstant', validator: { validate: isInstant, defaultMessage: (a) => `${a?.property} must be an RFC 3339 date-time of a real instant (e.g. 2026-01-31T12:00:00Z)` } }, options);

/** spec 4.4 activity query: cursor, limit (default 50, max 200), since, until, actor_user_id, action_type. */
export class AgentActivityRequestDto {
  @ApiPropertyOptional({ description: CURSOR_DESCRIPTION }) @IsOptional() @IsString() cursor?: string;
  @ApiPropertyOptional({ type: 'integer', minimum: 1, maximum: 200, default: 50 }) @IsOptional() @Transform(queryInt) @IsInt() @Min(1) @Max(200) limit?: number;
  @ApiPropertyOptional({ format: 'date-time', description: 'RFC 3339; actions at or after this instant' }) @IsOptional() @IsInstant() since?: string;
  @ApiPropertyOptional({ format: 'date-time', description: 'RFC 3339; actions before this instant' }) @IsOptional() @IsInstant() until?: string;
  @ApiPropertyOptional({ format: 'uuid', description: 'owners only (members: 403 auth/forbidden)' }) @IsOptional() @IsUUID() actor_user_id?: string;
  @ApiPropertyOptional({ minLength: 1, maxLength: 64, example: 'token_exchange' }) @IsOptional() @IsString() @Length(1, 64) action_type?: string;
}
