import { ApiProperty } from '@nestjs/swagger';

/** Answer of POST /v1/auth/mfa/totp/setup (contract "Account security flows"). */
export class TotpSetupResponseDto {
  @ApiProperty({ description: 'base32 (RFC 4648, no padding) of a 20-byte seed', example: 'JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP' })
  secret!: string;
  @ApiProperty({
    description: 'otpauth Key URI: otpauth://totp/<tenant>:<email>?secret=..&issuer=<tenant>&algorithm=SHA1&digits=6&period=30',
  })
  otpauth_url!: string;
}

/** Answer of verify-setup and of recovery-code regeneration: shown once, stored hashed. */
export class RecoveryCodesResponseDto {
  @ApiProperty({ type: [String], minItems: 10, maxItems: 10, description: 'single-use codes (xxxxx-xxxxx), each accepted once in place of a TOTP code' })
  recovery_codes!: string[];
}

/** spec 2.5 step-up answer: a fresh access token of the same session. */
export class StepUpResponseDto {
  @ApiProperty({ description: 'access token with `step_up_at` (NumericDate) and the method added to `amr`' })
  access_token!: string;
  @ApiProperty({ type: 'integer', description: 'access token lifetime in seconds' }) expires_in!: number;
  @ApiProperty({ enum: ['Bearer'] }) token_type!: 'Bearer';
}
