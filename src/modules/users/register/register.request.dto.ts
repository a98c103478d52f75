import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { Equals, IsBoolean, IsString, Matches, Validate, ValidatorConstraint, ValidatorConstraintInterface } from 'class-validator';
import { Length, MaxLength, PASSWORD_LENGTH_DOC, PasswordLength } from '../../../shared/http/lengths';
import { Present } from '../../../shared/http/presence';
import { isCalendarDate } from '../../../shared/http/dates';
import { IsEmailAddress } from '../../../shared/http/email-address';

/** A real calendar date (YYYY-MM-DD) from 1900-01-01 on, not in the future. */
@ValidatorConstraint({ name: 'pastDate' })
export class PastDateConstraint implements ValidatorConstraintInterface {
  validate(value: unknown): boolean {
    if (typeof value !== 'string' || !isCalendarDate(value)) return false;
    const d = new Date(`${value}T00:00:00Z`);
    return d.getTime() <= Date.now() && d.getUTCFullYear() >= 1900;
  }
  defaultMessage(): string {
    return 'date_of_birth must be a real date (YYYY-MM-DD) from 1900-01-01 on, not in the future';
  }
}

/** spec 2.2 RegisterRequest */
export class RegisterRequestDto {
  @ApiProperty({ format: 'email', maxLength: 254 }) @IsEmailAddress() @MaxLength(254) email!: string;
  @ApiProperty({ minLength: 12, maxLength: 128, description: PASSWORD_LENGTH_DOC }) @IsString() @PasswordLength(12, 128) password!: string;
  @ApiProperty({ type: 'boolean', enum: [true], description: 'must be true: registering accepts the terms (recorded as the time of consent)' }) @IsBoolean() @Equals(true, { message: 'consent must be true' }) consent!: boolean;
  @ApiPropertyOptional({ format: 'date', pattern: '^\\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\\d|3[01])$', description: 'a real date from 1900-01-01 on, not in the future; required when the tenant has minor protection enabled (else 400 user/date_of_birth_required); stored encrypted, never echoed' })
  @Present() @IsString() @Matches(/^\d{4}-\d{2}-\d{2}$/, { message: 'date_of_birth must match YYYY-MM-DD' }) @Validate(PastDateConstraint)
  date_of_birth?: string;
  @ApiPropertyOptional({
    minLength: 1,
    maxLength: 512,
    description: 'a token of EU-wallet age verification; this service offers none yet, so none is valid: 400 user/age_verification_invalid (send date_of_birth)',
  })
  @Present() @IsString() @Length(1, 512)
  age_verification_token?: string;
  @ApiPropertyOptional({
    minLength: 1,
    maxLength: 512,
    description: 'an end-user invitation (organizations); this service issues none, so none is valid: 400 user/invite_invalid (dashboard invitations are accepted at /v1/auth/dashboard/invites/accept)',
  })
  @Present() @IsString() @Length(1, 512)
  invite_token?: string;
}
