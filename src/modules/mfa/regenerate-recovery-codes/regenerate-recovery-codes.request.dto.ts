import { ApiProperty } from '@nestjs/swagger';
import { IsString, Matches } from 'class-validator';
import { CURRENT_PASSWORD_LENGTH_DOC, CurrentPasswordLength } from '../../../shared/http/lengths';

/** spec 2.2 MfaRegenerateCodesRequest */
export class MfaRegenerateCodesRequestDto {
  @ApiProperty({ pattern: '^\\d{6}$', description: 'a current TOTP code (recovery codes are not accepted here)' })
  @IsString()
  @Matches(/^\d{6}$/, { message: 'code must be exactly 6 digits' })
  code!: string;

  @ApiProperty({ minLength: 1, maxLength: 256, description: `the account password; ${CURRENT_PASSWORD_LENGTH_DOC}` })
  @IsString()
  @CurrentPasswordLength(1, 256)
  password!: string;
}
