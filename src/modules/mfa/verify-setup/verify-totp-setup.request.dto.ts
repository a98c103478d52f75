import { ApiProperty } from '@nestjs/swagger';
import { IsString, Matches } from 'class-validator';

/** spec 2.2 MfaVerifySetupRequest */
export class MfaVerifySetupRequestDto {
  @ApiProperty({ pattern: '^\\d{6}$', description: 'the current code of the authenticator app' })
  @IsString()
  @Matches(/^\d{6}$/, { message: 'code must be exactly 6 digits' })
  code!: string;
}
