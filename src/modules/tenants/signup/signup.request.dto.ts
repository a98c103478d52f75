import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { Transform } from 'class-transformer';
import { Equals, IsBoolean, IsString } from 'class-validator';
import { Length, MaxLength, MinLength, PASSWORD_LENGTH_DOC, PasswordLength } from '../../../shared/http/lengths';
import { Present } from '../../../shared/http/presence';
import { IsDisplayName } from '../../../shared/http/display-name';
import { IsEmailAddress } from '../../../shared/http/email-address';

/** spec 2.1 Onboarding signup request */
export class SignupRequestDto {
  @ApiProperty({ format: 'email', maxLength: 254 }) @IsEmailAddress() @MaxLength(254) email!: string;
  @ApiProperty({ minLength: 12, maxLength: 128, description: PASSWORD_LENGTH_DOC }) @IsString() @PasswordLength(12, 128) password!: string;
  /** the length applies to the name as stored: surrounding whitespace is trimmed first */
  @ApiProperty({ minLength: 2, maxLength: 50, description: 'surrounding whitespace is trimmed before the length check; at least one visible character; no control characters, line separators or bidirectional overrides' })
  @Transform(({ value }) => (typeof value === 'string' ? value.trim() : value))
  @IsString() @Length(2, 50) @IsDisplayName() tenant_name!: string;
  @ApiProperty({ type: 'boolean', enum: [true], description: 'must be true' }) @IsBoolean() @Equals(true, { message: 'consent_terms must be true' }) consent_terms!: boolean;
  @ApiProperty({ type: 'boolean', enum: [true], description: 'must be true' }) @IsBoolean() @Equals(true, { message: 'consent_privacy must be true' }) consent_privacy!: boolean;
  @ApiPropertyOptional({ default: false }) @Present() @IsBoolean() consent_marketing?: boolean;
  @ApiPropertyOptional({ minLength: 36, maxLength: 255, description: 'UUID v4 recommended; the same key returns the same answer' })
  @Present() @IsString() @MinLength(36) @MaxLength(255) idempotency_key?: string;
  @ApiPropertyOptional({ maxLength: 2048, description: 'honeypot: leave blank' }) @Present() @IsString() @MaxLength(2048) website?: string;
  @ApiPropertyOptional({ maxLength: 4096, description: 'bot-challenge token (Cloudflare Turnstile)' }) @Present() @IsString() @MaxLength(4096) turnstile_token?: string;
}
