import { ApiProperty } from '@nestjs/swagger';
import { IsString, Matches } from 'class-validator';
import { MaxLength, MinLength } from '../../../shared/http/lengths';

/** spec 2.2 MfaRegenerateCodesRequest */
export class MfaRegenerateCodesRequestDto {
  @ApiProperty({ pattern: '^\\d{6}$', description: 'a current TOTP code (recovery codes are not accepted here)' })
  @IsString()
  @Matches(/^\d{6}$/, { message: 'code must be exactly 6 digits' })
  code!: string;

  @ApiProperty({ minLength: 1, maxLength: 256, description: 'the account password' })
  @IsString()
  @MinLength(1)
  @MaxLength(256)
  password!: string;
}
