import { ApiProperty } from '@nestjs/swagger';
import { IsString, Length } from 'class-validator';
import { CursorQuery } from '../../shared/db/pagination';

export class CreateApiKeyRequestDto {
  @ApiProperty({ minLength: 1, maxLength: 100 }) @IsString() @Length(1, 100) name!: string;
}

export class ListApiKeysQueryDto extends CursorQuery {}

export interface ApiKeyResponse {
  id: string;
  name: string;
  prefix: string;
  created_at: string;
  revoked_at: string | null;
}
