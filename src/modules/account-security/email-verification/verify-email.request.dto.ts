import { ApiProperty } from '@nestjs/swagger';
import { IsEmail, IsString } from 'class-validator';
import { MaxLength, MinLength } from '../../../shared/http/lengths';

/** spec 2.2 VerifyEmailRequest */
export class VerifyEmailRequestDto {
  @ApiProperty({ minLength: 1, description: 'the token of the link in the verification email' }) @IsString() @MinLength(1) token!: string;
}

/** spec 2.2 ResendVerificationRequest */
export class ResendVerificationRequestDto {
  @ApiProperty({ format: 'email', maxLength: 254 }) @IsEmail() @MaxLength(254) email!: string;
}
