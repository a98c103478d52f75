import { ApiProperty } from '@nestjs/swagger';
import { IsEmail, IsString } from 'class-validator';
import { Length, MaxLength } from '../../../shared/http/lengths';

/** spec 2.2 LoginRequest */
export class LoginRequestDto {
  // IsEmail, not IsEmailAddress: an account whose address predates that check still signs in
  @ApiProperty({ format: 'email', maxLength: 254 }) @IsEmail() @MaxLength(254) email!: string;
  @ApiProperty({ minLength: 12, maxLength: 128 }) @IsString() @Length(12, 128) password!: string;
}
