import { ApiProperty } from '@nestjs/swagger';
import { IsString } from 'class-validator';
import { CURRENT_PASSWORD_LENGTH_DOC, CurrentPasswordLength, MaxLength, MinLength } from '../../../shared/http/lengths';

/** spec 2.2 MfaDisableRequest */
export class MfaDisableRequestDto {
  @ApiProperty({ minLength: 1, maxLength: 64, description: 'a current TOTP code, or an unused recovery code' })
  @IsString()
  @MinLength(1)
  @MaxLength(64)
  code!: string;

  @ApiProperty({ minLength: 1, maxLength: 256, description: `the account password; ${CURRENT_PASSWORD_LENGTH_DOC}` })
  @IsString()
  @CurrentPasswordLength(1, 256)
  password!: string;
}
