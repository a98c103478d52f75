import { ApiProperty, OmitType } from '@nestjs/swagger';
import { ApiKeyResponse } from './api-keys.dto';

// OpenAPI documentation of the API key answers; the handlers answer the interfaces.

export class ApiKeyResponseDto implements ApiKeyResponse {
  @ApiProperty({ format: 'uuid' }) id!: string;
  @ApiProperty() name!: string;
  @ApiProperty({ description: 'the first characters of the key, to recognise it' }) prefix!: string;
  @ApiProperty({ format: 'date-time' }) created_at!: string;
  @ApiProperty({ type: String, format: 'date-time', nullable: true }) revoked_at!: string | null;
}

/** 201: the record plus the key itself, shown once (only its hash is stored). */
export class CreatedApiKeyResponseDto extends OmitType(ApiKeyResponseDto, ['revoked_at'] as const) {
  @ApiProperty({ description: 'shown once; send as X-API-Key' }) key!: string;
}

export class RevokedApiKeyResponseDto {
  @ApiProperty({ format: 'uuid' }) id!: string;
  @ApiProperty({ format: 'date-time', description: 'the first revocation time, unchanged on repeat calls' }) revoked_at!: string;
}
