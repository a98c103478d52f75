import { ApiPropertyOptional } from '@nestjs/swagger';
import { Transform } from 'class-transformer';
import { IsBoolean, IsOptional } from 'class-validator';
import { CursorQuery } from '../../../shared/db/pagination';

const toBool = ({ value }: { value: unknown }) => (value === 'true' ? true : value === 'false' ? false : value);

/** spec 4.4 list query: include_revoked, cursor, limit (default 20, max 100). */
export class ListAgentsRequestDto extends CursorQuery {
  @ApiPropertyOptional({ default: false, description: 'include revoked agents (excluded by default)' })
  @IsOptional() @Transform(toBool) @IsBoolean()
  include_revoked?: boolean;
}
