import { ApiProperty } from '@nestjs/swagger';
import { IsEmail, IsString } from 'class-validator';
import { CURRENT_PASSWORD_LENGTH_DOC, CurrentPasswordLength, MaxLength } from '../../../shared/http/lengths';

/** spec 2.2 LoginRequest */
export class LoginRequestDto {
  // IsEmail, not IsEmailAddress: an account whose address predates that check still signs in
  @ApiProperty({ format: 'email', maxLength: 254 }) @IsEmail() @MaxLength(254) email!: string;
  @ApiProperty({ minLength: 12, maxLength: 128, description: CURRENT_PASSWORD_LENGTH_DOC }) @IsString() @CurrentPasswordLength(12, 128) password!: string;
}
