import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { ArrayMaxSize, ArrayUnique, IsArray, IsIn, IsString, IsUrl, Length, Matches, MaxLength } from 'class-validator';
import { CursorQuery } from '../../../shared/db/pagination';
import { Present } from '../../../shared/http/presence';
import { IsDisplayName } from '../../../shared/http/display-name';

/** Grant types of legacy (non-agent) OAuth clients; agent grants live on agent clients (spec 5 rule 2). */
export const OAUTH_CLIENT_GRANT_TYPES = ['authorization_code', 'refresh_token', 'client_credentials'] as const;


/** Contract "Agents and OAuth": a legacy OAuth client; `client_type: "agent"` is refused before validation. */
export class CreateOAuthClientRequestDto {
  @ApiProperty({ minLength: 1, maxLength: 100, description: 'at least one visible character; no control characters, line separators or bidirectional overrides' }) @IsString() @Length(1, 100) @IsDisplayName() name!: string;

  @ApiProperty({ enum: ['public', 'confidential'], description: '"agent" is 400 oauth_client/use_agents_endpoint' })
  @IsIn(['public', 'confidential'])
  client_type!: 'public' | 'confidential';

  @ApiPropertyOptional({ type: [String], format: 'uri', maxItems: 20 })
  @Present() @IsArray() @ArrayMaxSize(20) @ArrayUnique() @IsString({ each: true }) @MaxLength(2048, { each: true })
  @IsUrl({ require_protocol: true, require_tld: false, protocols: ['https', 'http'] }, { each: true })
  redirect_uris?: string[];

  @ApiPropertyOptional({ type: [String], enum: OAUTH_CLIENT_GRANT_TYPES, default: ['authorization_code'] })
  @Present() @IsArray() @ArrayMaxSize(3) @ArrayUnique() @IsIn(OAUTH_CLIENT_GRANT_TYPES, { each: true })
  grant_types?: string[];

  @ApiPropertyOptional({ type: [String], maxItems: 100 })
  @Present() @IsArray() @ArrayMaxSize(100) @ArrayUnique() @IsString({ each: true }) @Length(1, 128, { each: true })
  @Matches(/^[\x21\x23-\x5B\x5D-\x7E]+$/, { each: true, message: 'each scope must be an RFC 6749 scope-token' })
  scopes?: string[];
}

export class ListOAuthClientsRequestDto extends CursorQuery {}

export class OAuthClientResponse {
  @ApiProperty({ format: 'uuid' }) id!: string;
  @ApiProperty({ format: 'uuid', description: 'equals id' }) client_id!: string;
  @ApiProperty() name!: string;
  @ApiProperty({ enum: ['public', 'confidential'] }) client_type!: string;
  @ApiProperty({ type: [String] }) redirect_uris!: string[];
  @ApiProperty({ type: [String] }) grant_types!: string[];
  @ApiProperty({ type: [String] }) scopes!: string[];
  @ApiProperty({ format: 'date-time' }) created_at!: string;
  @ApiProperty({ type: String, format: 'date-time', nullable: true }) revoked_at!: string | null;
}

export class CreatedOAuthClientResponse extends OAuthClientResponse {
  @ApiPropertyOptional({ description: 'confidential clients only; shown once, only its SHA-256 is stored' }) client_secret?: string;
}
