import { ApiProperty } from '@nestjs/swagger';
import { IsString } from 'class-validator';
import { Length } from '../../shared/http/lengths';
import { CursorQuery } from '../../shared/db/pagination';
import { IsDisplayName } from '../../shared/http/display-name';

export class CreateApiKeyRequestDto {
  @ApiProperty({ minLength: 1, maxLength: 100, description: 'at least one visible character; no control characters, line separators or bidirectional overrides' }) @IsString() @Length(1, 100) @IsDisplayName() name!: string;
}

export class ListApiKeysQueryDto extends CursorQuery {}

export interface ApiKeyResponse {
  id: string;
  name: string;
  prefix: string;
  created_at: string;
  revoked_at: string | null;
}
