import { ApiProperty } from '@nestjs/swagger';
import { IsEmail, IsString } from 'class-validator';
import { CURRENT_PASSWORD_LENGTH_DOC, CurrentPasswordLength, MaxLength, MinLength, PASSWORD_LENGTH_DOC, PasswordLength } from '../../../shared/http/lengths';

/** spec 2.2 ForgotPasswordRequest */
export class ForgotPasswordRequestDto {
  @ApiProperty({ format: 'email', maxLength: 254 }) @IsEmail() @MaxLength(254) email!: string;
}

/** spec 2.2 ResetPasswordRequest */
export class ResetPasswordRequestDto {
  @ApiProperty({ minLength: 1, description: 'the token of the link in the reset email' }) @IsString() @MinLength(1) token!: string;
  @ApiProperty({ minLength: 12, maxLength: 128, description: PASSWORD_LENGTH_DOC }) @IsString() @PasswordLength(12, 128) password!: string;
}

/** spec 2.2 ChangePasswordRequest */
export class ChangePasswordRequestDto {
  @ApiProperty({ minLength: 1, description: CURRENT_PASSWORD_LENGTH_DOC }) @IsString() @CurrentPasswordLength(1) current_password!: string;
  @ApiProperty({ minLength: 12, maxLength: 128, description: PASSWORD_LENGTH_DOC }) @IsString() @PasswordLength(12, 128) new_password!: string;
}
