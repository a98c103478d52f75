import { ApiProperty } from '@nestjs/swagger';

/** Issue 5: a password reset link lives 30 minutes. */
export const PASSWORD_RESET_TTL_SECONDS = 30 * 60;
/** Issue 5: a magic link (sign-in or step-up) lives 15 minutes. */
export const MAGIC_LINK_TTL_SECONDS = 15 * 60;
/** Issue 5: an email code lives 10 minutes. */
export const EMAIL_OTP_TTL_SECONDS = 10 * 60;
/** Issue 5: a code is evaluated at most 5 times, then it is dead. */
export const EMAIL_OTP_MAX_ATTEMPTS = 5;

/** RFC 8176 has no value for "proved control of the mailbox": `email` is ours (documented in the README). */
export const AMR_MAGIC_LINK = ['email'];
/** An emailed one-time code: RFC 8176 `otp` (as Supabase names it); aal stays AAL1, unlike TOTP MFA (pwd + otp, AAL2). */
export const AMR_EMAIL_OTP = ['otp'];

/** The one 202 body of every mail-sending request: the same whether or not the address has an account. */
export class AcceptedResponse {
  @ApiProperty({ example: 'accepted' }) status!: 'accepted';
  @ApiProperty() message!: string;
}

export const ACCEPTED: AcceptedResponse = Object.freeze({
  status: 'accepted',
  message: 'If the address can receive it, a message is on its way.',
});
