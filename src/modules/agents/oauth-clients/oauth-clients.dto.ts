import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { ArrayMaxSize, ArrayUnique, IsArray, IsIn, IsString, Matches } from 'class-validator';
import { Length, MaxLength } from '../../../shared/http/lengths';
import { CursorQuery } from '../../../shared/db/pagination';
import { Present } from '../../../shared/http/presence';
import { IsDisplayName } from '../../../shared/http/display-name';
import { IsRedirectUri } from './redirect-uri';
import { SCOPE_TOKEN, SCOPE_TOKEN_PATTERN } from '../agent.request.dto';

/** Grant types of legacy (non-agent) OAuth clients; agent grants live on agent clients (spec 5 rule 2). */
export const OAUTH_CLIENT_GRANT_TYPES = ['authorization_code', 'refresh_token', 'client_credentials'] as const;


/** Contract "Agents and OAuth": a legacy OAuth client; `client_type: "agent"` is refused before validation. */
export class CreateOAuthClientRequestDto {
  @ApiProperty({ minLength: 1, maxLength: 100, description: 'at least one visible character; no control characters, line separators or bidirectional overrides' }) @IsString() @Length(1, 100) @IsDisplayName() name!: string;

  @ApiProperty({ enum: ['public', 'confidential'], description: '"agent" is 400 oauth_client/use_agents_endpoint' })
  @IsIn(['public', 'confidential'])
  client_type!: 'public' | 'confidential';

  @ApiPropertyOptional({
    type: 'array',
    items: { type: 'string', format: 'uri', maxLength: 2048 },
    maxItems: 20,
    uniqueItems: true,
    description:
      'https; http only on a loopback host (127.0.0.1, [::1], localhost); or a native app private-use scheme named as a reverse domain (com.example.app:/cb). ' +
      'No fragment (RFC 6749 section 3.1.2), no userinfo (RFC 9700, RFC 8252)',
  })
  @Present() @IsArray() @ArrayMaxSize(20) @ArrayUnique() @IsString({ each: true }) @MaxLength(2048, { each: true })
  @IsRedirectUri({ each: true })
  redirect_uris?: string[];

  @ApiPropertyOptional({ type: [String], enum: OAUTH_CLIENT_GRANT_TYPES, maxItems: 3, uniqueItems: true, default: ['authorization_code'] })
  @Present() @IsArray() @ArrayMaxSize(3) @ArrayUnique() @IsIn(OAUTH_CLIENT_GRANT_TYPES, { each: true })
  grant_types?: string[];

  @ApiPropertyOptional({
    type: 'array',
    items: { type: 'string', minLength: 1, maxLength: 128, pattern: SCOPE_TOKEN_PATTERN },
    maxItems: 100,
    uniqueItems: true,
    description: 'each an RFC 6749 scope-token of 1-128 characters',
  })
  @Present() @IsArray() @ArrayMaxSize(100) @ArrayUnique() @IsString({ each: true }) @Length(1, 128, { each: true })
  @Matches(SCOPE_TOKEN, { each: true, message: 'each scope must be an RFC 6749 scope-token' })
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

/** The oauth_clients columns every answer is built from (never secret_hash). */
export interface ClientRow {
  id: string;
  name: string;
  client_type: 'public' | 'confidential';
  redirect_uris: string[];
  grant_types: string[];
  scopes: string[];
  created_at: Date;
  revoked_at: Date | null;
}

export const OAUTH_CLIENT_COLUMNS = 'id, name, client_type, redirect_uris, grant_types, scopes, created_at, revoked_at';

export const toOAuthClientResponse = (r: ClientRow): OAuthClientResponse => ({
  id: r.id,
  client_id: r.id,
  name: r.name,
  client_type: r.client_type,
  redirect_uris: r.redirect_uris,
  grant_types: r.grant_types,
  scopes: r.scopes,
  created_at: r.created_at.toISOString(),
  revoked_at: r.revoked_at ? r.revoked_at.toISOString() : null,
});
