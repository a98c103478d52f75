import { ApiProperty } from '@nestjs/swagger';
import { IsEmail, IsString } from 'class-validator';
import { Length, MaxLength, PASSWORD_LENGTH_DOC, PasswordLength } from '../../../shared/http/lengths';

export class DashboardForgotPasswordRequestDto {
  // IsEmail, as at login: an account whose address predates the stricter check can still reset
  @ApiProperty({ format: 'email', maxLength: 254 }) @IsEmail() @MaxLength(254) email!: string;
}

export class DashboardResetPasswordRequestDto {
  @ApiProperty({ minLength: 1, maxLength: 512, description: 'the token of the emailed link' }) @IsString() @Length(1, 512) token!: string;
  @ApiProperty({ minLength: 12, maxLength: 128, description: `the new password; ${PASSWORD_LENGTH_DOC}` }) @IsString() @PasswordLength(12, 128) password!: string;
}
