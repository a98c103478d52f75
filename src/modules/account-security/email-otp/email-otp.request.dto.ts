import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import { IsIn, IsObject, IsString, Matches, ValidateNested } from 'class-validator';
import { MaxLength } from '../../../shared/http/lengths';
import { OAuthParamsDto } from '../oauth-params';
import { Present } from '../../../shared/http/presence';
import { IsEmailAddress } from '../../../shared/http/email-address';

export const EMAIL_OTP_MODES = ['login', 'login_or_create'] as const;

const BINDING_DOC =
  'opaque value (at most 64 characters) the requesting browser keeps; when given with the request, the verification must present the same value';

/** spec 2.2 UserEmailOtpRequest (plus the optional resume_binding, see UserEmailOtpVerifyRequest) */
export class UserEmailOtpRequestDto {
  @ApiProperty({ format: 'email', maxLength: 254 }) @IsEmailAddress() @MaxLength(254) email!: string;
  @ApiPropertyOptional({ enum: EMAIL_OTP_MODES, default: 'login', description: 'login_or_create creates a verified account for a new address' })
  @Present() @IsIn(EMAIL_OTP_MODES)
  mode?: (typeof EMAIL_OTP_MODES)[number];
  @ApiPropertyOptional({ type: OAuthParamsDto, description: 'the authorization request to resume; redirect_uri must be registered for client_id' })
  @Present() @IsObject() @ValidateNested() @Type(() => OAuthParamsDto)
  oauth_params?: OAuthParamsDto;
  @ApiPropertyOptional({ description: 'bot-challenge token (Cloudflare Turnstile); required when the tenant requires a captcha for email codes' })
  @Present() @IsString()
  captcha_token?: string;
  @ApiPropertyOptional({ maxLength: 64, description: BINDING_DOC }) @Present() @IsString() @MaxLength(64) resume_binding?: string;
}

/** spec 2.2 UserEmailOtpVerifyRequest */
export class UserEmailOtpVerifyRequestDto {
  @ApiProperty({ format: 'email', maxLength: 254 }) @IsEmailAddress() @MaxLength(254) email!: string;
  @ApiProperty({ pattern: '^\\d{6}$' }) @IsString() @Matches(/^\d{6}$/, { message: 'code must be exactly 6 digits' }) code!: string;
  @ApiPropertyOptional({ maxLength: 64, description: BINDING_DOC }) @Present() @IsString() @MaxLength(64) resume_binding?: string;
}
