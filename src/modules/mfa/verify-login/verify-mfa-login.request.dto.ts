import { ApiProperty } from '@nestjs/swagger';
import { IsString } from 'class-validator';
import { MaxLength, MinLength } from '../../../shared/http/lengths';

/** spec 2.2 MfaVerifyLoginRequest */
export class MfaVerifyLoginRequestDto {
  @ApiProperty({ minLength: 1, maxLength: 512, description: 'from the login answer `{mfa_required: true, mfa_challenge_token}`' })
  @IsString()
  @MinLength(1)
  @MaxLength(512)
  mfa_challenge_token!: string;

  @ApiProperty({ minLength: 1, maxLength: 64, description: 'the 6-digit TOTP code, or one unused recovery code (xxxxx-xxxxx)' })
  @IsString()
  @MinLength(1)
  @MaxLength(64)
  code!: string;
}
