import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsString } from 'class-validator';
import { Length, MaxLength } from '../../../shared/http/lengths';
import { IsPlainText } from '../../../shared/http/display-name';
import { Present } from '../../../shared/http/presence';

const HINT_DOC = 'what the step-up is for, shown in the email (e.g. "change your email address") when the address of the account is verified (an unverified address gets the mail without it); no control characters but tabs and line breaks, no bidirectional overrides';

/** spec 2.5 StepUpMagicLinkInitiateRequest */
export class StepUpMagicLinkInitiateRequestDto {
  @ApiPropertyOptional({ maxLength: 80, description: HINT_DOC }) @Present() @IsString() @MaxLength(80) @IsPlainText() action_hint?: string;
}

/** spec 2.5 StepUpMagicLinkVerifyRequest */
export class StepUpMagicLinkVerifyRequestDto {
  @ApiProperty({ minLength: 1, maxLength: 256 }) @IsString() @Length(1, 256) token!: string;
}

/** spec 2.5 StepUpEmailOtpInitiateRequest */
export class StepUpEmailOtpInitiateRequestDto {
  @ApiPropertyOptional({ maxLength: 80, description: HINT_DOC }) @Present() @IsString() @MaxLength(80) @IsPlainText() action_hint?: string;
}

/** spec 2.5 StepUpEmailOtpVerifyRequest */
export class StepUpEmailOtpVerifyRequestDto {
  @ApiProperty({ minLength: 1, maxLength: 8, description: 'the 6-digit code of the email' }) @IsString() @Length(1, 8) otp!: string;
}

/** 202 of a step-up initiation: the mail goes to the account's own address. */
export class StepUpInitiatedResponse {
  @ApiProperty({ example: 'accepted' }) status!: 'accepted';
  @ApiProperty({ type: 'integer', description: 'seconds the link or code stays valid' }) expires_in!: number;
}
