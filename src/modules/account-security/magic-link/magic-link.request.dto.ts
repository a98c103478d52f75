import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import { IsObject, IsString, ValidateNested } from 'class-validator';
import { MaxLength, MinLength } from '../../../shared/http/lengths';
import { OAuthParamsDto } from '../oauth-params';
import { Present } from '../../../shared/http/presence';
import { IsEmailAddress } from '../../../shared/http/email-address';

const BINDING_DOC =
  'opaque value (at most 64 characters) the requesting browser keeps; when given with the request, the verification must present the same value';

/** spec 2.2 UserMagicLinkRequest (plus the optional resume_binding, see UserMagicLinkVerifyRequest) */
export class UserMagicLinkRequestDto {
  @ApiProperty({ format: 'email', maxLength: 254 }) @IsEmailAddress() @MaxLength(254) email!: string;
  @ApiPropertyOptional({ type: OAuthParamsDto, description: 'the authorization request to resume; redirect_uri must be registered for client_id' })
  @Present() @IsObject() @ValidateNested() @Type(() => OAuthParamsDto)
  oauth_params?: OAuthParamsDto;
  @ApiPropertyOptional({ maxLength: 64, description: BINDING_DOC }) @Present() @IsString() @MaxLength(64) resume_binding?: string;
}

/** spec 2.2 UserMagicLinkVerifyRequest */
export class UserMagicLinkVerifyRequestDto {
  @ApiProperty({ minLength: 1 }) @IsString() @MinLength(1) token!: string;
  @ApiPropertyOptional({ maxLength: 64, description: BINDING_DOC }) @Present() @IsString() @MaxLength(64) resume_binding?: string;
}
